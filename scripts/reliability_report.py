#!/usr/bin/env python3
"""The figures the fault tests measured, as a results file named by date and machine.

Each fault test records what it measured with `figure()` (tests/faults/support.py), one JSON line
appended to `var/reliability-figures.jsonl` (under `KERNELINDEX_VAR_DIR` where that is set). This
script writes the latest entry of each figure, with the machine and the versions it ran on, to
`bench/results/reliability-DATE-MACHINE.json` and `.md`; docs/reliability.md cites the `.md`.

    rm -f var/reliability-figures.jsonl
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kernelindex CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python -m pytest -p no:cacheprovider -n 0 tests/faults
    .venv/bin/python scripts/reliability_report.py
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = Path(os.environ.get("KERNELINDEX_VAR_DIR") or ROOT / "var") / "reliability-figures.jsonl"
RESULTS = ROOT / "bench" / "results"
PACKAGES = ("django", "celery", "kombu", "redis", "psycopg", "locust")


def latest_entries(lines: list[str]) -> list[dict]:
    """The last entry of each figure, in the order the figures were first recorded."""
    latest: dict[str, dict] = {}
    for line in lines:
        if line.strip():
            entry = json.loads(line)
            latest.pop(entry["figure"], None)
            latest[entry["figure"]] = entry
    return sorted(latest.values(), key=lambda entry: entry["figure"])


def machine_name() -> str:
    """What a results file is named by besides its date: the cores and the architecture."""
    return f"{os.cpu_count()}-core-{platform.machine()}"


def _version_line(command: list[str]) -> str:
    if not shutil.which(command[0]):
        return "absent"
    done = subprocess.run(command, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else "unknown"


def environment() -> dict:
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = "absent"
    return {
        "machine": machine_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "packages": packages,
        "redis-server": _version_line(["redis-server", "--version"]),
        "postgres": _version_line(["postgres", "--version"]),
    }


def _cell(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {_cell(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    return str(value)


def markdown(entries: list[dict], env: dict, date: str, note: str = "") -> str:
    lines = [
        f"# Fault-test figures, {date}, {env['machine']}",
        "",
        "Written by `scripts/reliability_report.py` from the `figure()` lines the fault tests "
        "recorded (tests/faults/support.py); the latest entry of each figure. docs/reliability.md "
        "cites this file.",
        "",
        f"Python {env['python']}; "
        + "; ".join(f"{k} {v}" for k, v in env["packages"].items())
        + f"; {env['redis-server']}; {env['postgres']}.",
        "",
        *([f"Conditions: {note}", ""] if note else []),
        "| figure | value | detail | recorded at |",
        "| --- | --- | --- | --- |",
    ]
    for entry in entries:
        detail = {k: v for k, v in entry.items() if k not in {"figure", "value", "at"}}
        lines.append(f"| {entry['figure']} | {_cell(entry['value'])} | {_cell(detail)} | {entry['at']} |")
    return "\n".join(lines) + "\n"


def write(figures: Path, results: Path, note: str = "") -> Path:
    entries = latest_entries(figures.read_text().splitlines())
    if not entries:
        raise SystemExit(f"{figures} holds no figure: run the fault tests first")
    date = max(entry["at"] for entry in entries)[:10]
    env = environment()
    stem = results / f"reliability-{date}-{env['machine']}"
    stem.with_suffix(".json").write_text(
        json.dumps({"date": date, "environment": env, "note": note, "figures": entries}, indent=2) + "\n"
    )
    stem.with_suffix(".md").write_text(markdown(entries, env, date, note))
    return stem.with_suffix(".md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figures", type=Path, default=FIGURES, help="the fault tests' JSON lines")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder the files go to")
    parser.add_argument("--note", default="", help="what else ran on the machine, its load")
    args = parser.parse_args()
    if not args.figures.is_file():
        sys.exit(f"{args.figures} does not exist: run the fault tests first")
    print(write(args.figures, args.results, args.note))


if __name__ == "__main__":
    main()
