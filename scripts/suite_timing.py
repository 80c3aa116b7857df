#!/usr/bin/env python3
"""The test suite's time, as a results file named by date and machine.

Runs a test command (by default the README's, `python3 scripts/dev.py test`), with the arguments
given after `--`, and writes what it took to `bench/results/test-suite-DATE-MACHINE.json` and `.md`:
the command, the wall time, the user and system CPU of it and its children, the load average before
and after, and pytest's summary line. docs/performance.md ("The test suite") cites the `.md`.
With `--by-module`, the files also hold where the time went: each module's CPU seconds (its tests'
own and their child processes', scripts/suite_cpu.py) and when each xdist worker finished.

    .venv/bin/python scripts/suite_timing.py --note "nothing else running"
    .venv/bin/python scripts/suite_timing.py --by-module
    .venv/bin/python scripts/suite_timing.py -- -n 0 tests/docs
"""

import argparse
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README_COMMAND = ["python3", "scripts/dev.py", "test"]
SUMMARY = re.compile(
    r"^[= ]*(\d+ (?:passed|failed|errors?|skipped|deselected)\b[^\n]*?) in [\d.]+s", re.MULTILINE
)


def machine_name() -> str:
    return f"{os.cpu_count()}-core-{platform.machine()}"


def timed(command: list[str], env: dict | None = None) -> dict:
    """Run the command in the checkout, its output passed through; what it took."""
    before, load_before, began = (
        resource.getrusage(resource.RUSAGE_CHILDREN),
        os.getloadavg(),
        time.monotonic(),
    )
    lines = []
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as run:
        for line in run.stdout:
            sys.stdout.write(line)
            lines.append(line)
    wall, after = time.monotonic() - began, resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = SUMMARY.findall("".join(lines))
    return {
        "command": shlex.join(command),
        "exit_status": run.returncode,
        "wall_s": round(wall, 1),
        "user_cpu_s": round(after.ru_utime - before.ru_utime, 1),
        "system_cpu_s": round(after.ru_stime - before.ru_stime, 1),
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
        "summary": summary[-1] if summary else "",
    }


MODULES_SHOWN = 25


def by_module(log: Path) -> dict:
    """The plugin's lines summed by test module: CPU seconds (own, children), the tests' wall
    seconds added up (a worker's tests overlap the others'), tests; and each worker's end."""
    modules = defaultdict(
        lambda: {"cpu_s": 0.0, "own_cpu_s": 0.0, "children_cpu_s": 0.0, "wall_s": 0.0, "tests": 0}
    )
    first, ends = float("inf"), defaultdict(float)
    for line in log.read_text().splitlines():
        worker, began, ended, own, children, nodeid = line.split("\t", 5)
        module = modules[nodeid.split("::")[0]]
        module["cpu_s"] += float(own) + float(children)
        module["own_cpu_s"] += float(own)
        module["children_cpu_s"] += float(children)
        module["wall_s"] += float(ended) - float(began)
        module["tests"] += 1
        first = min(first, float(began))
        ends[worker] = max(ends[worker], float(ended))
    ranked = sorted(modules.items(), key=lambda item: -item[1]["cpu_s"])
    return {
        "cpu_accounted_s": round(sum(m["cpu_s"] for m in modules.values()), 1),
        "workers_end_s": {worker: round(end - first, 1) for worker, end in sorted(ends.items())},
        "modules": [
            {"module": name, **{key: round(value, 1) for key, value in figures.items()}}
            for name, figures in ranked
        ],
    }


def modules_markdown(result: dict) -> list[str]:
    if "modules" not in result:
        return []
    shown = result["modules"][:MODULES_SHOWN]
    return [
        "",
        f"## Where the CPU went ({result['cpu_accounted_s']} s accounted to tests; the {len(shown)} costliest modules)",
        "",
        "Each worker's last test ended at (s after the first began): "
        + ", ".join(f"{worker} {end}" for worker, end in result["workers_end_s"].items())
        + ".",
        "",
        "| module | CPU s (own + children) | own | children | tests' wall s, summed | tests |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {m['module']} | {m['cpu_s']} | {m['own_cpu_s']} "
            f"| {m['children_cpu_s']} | {m['wall_s']} | {m['tests']} |"
            for m in shown
        ),
        "",
    ]


def markdown(result: dict) -> str:
    minutes, seconds = divmod(round(result["wall_s"]), 60)
    return "\n".join(
        [
            f"# The test suite's time, {result['date']}, {result['machine']}",
            "",
            "Written by `scripts/suite_timing.py`; docs/performance.md cites this file.",
            "",
            f"- command: `{result['command']}` (exit status {result['exit_status']})",
            f"- wall: {result['wall_s']} s ({minutes} min {seconds} s)",
            f"- CPU: {result['user_cpu_s']} s user, {result['system_cpu_s']} s system",
            "- load average (1, 5, 15 min) before: "
            + ", ".join(map(str, result["load_average_before"]))
            + "; after: "
            + ", ".join(map(str, result["load_average_after"])),
            f"- pytest: {result['summary'] or 'no summary line'}",
            *([f"- conditions: {result['note']}"] if result["note"] else []),
            "",
            *modules_markdown(result),
        ]
    )


def write(result: dict, results: Path) -> Path:
    stem = results / f"test-suite-{result['date']}-{result['machine']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    return stem.with_suffix(".md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--command", default=shlex.join(README_COMMAND), help="the test command, as one string"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder the files go to")
    parser.add_argument("--note", default="", help="what else ran on the machine")
    parser.add_argument(
        "--by-module", action="store_true", help="also each module's CPU (scripts/suite_cpu.py's lines)"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the arguments for the test command")
    args = parser.parse_args()
    extra = args.args[1:] if args.args[:1] == ["--"] else args.args
    if args.by_module:
        with tempfile.TemporaryDirectory() as folder:
            log = Path(folder) / "tests.tsv"
            env = {**os.environ, "SUITE_CPU_LOG": str(log), "PYTHONPATH": str(ROOT)}
            result = timed(shlex.split(args.command) + ["-p", "scripts.suite_cpu", *extra], env=env)
            result |= by_module(log) if log.exists() else {}
    else:
        result = timed(shlex.split(args.command) + extra)
    result |= {"date": time.strftime("%Y-%m-%d"), "machine": machine_name(), "note": args.note}
    print(write(result, args.results))
    sys.exit(result["exit_status"])


if __name__ == "__main__":
    main()
