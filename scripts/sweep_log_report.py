#!/usr/bin/env python3
"""The H200 sweep by date and card, from the shipped controlled runs (registry/data/controlled-runs/)
and the hosts' log (bench/results/h200-sweep-hosts-log.md), as Markdown on standard output. No
Django and no database: the figures come from the files alone.

    .venv/bin/python scripts/sweep_log_report.py > docs/reports/2026-12-04-h200-sweep-log.md

From the files, for the jobs started from FIRST to LAST (UTC dates): each card's measure jobs and
reruns by date; each card's reruns of runs another card measured, by verdict; and where each
card's seconds went (the harness's own record of setup, process start, warm-up, timing and
upstream's call). The hosts' log, what happened to each call (lost results, time limits, what
was left out and why), is quoted as written: a log, not a result; no test recomputes it.
"""

import gzip
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "registry" / "data" / "controlled-runs"
HOSTS_LOG = ROOT / "bench" / "results" / "h200-sweep-hosts-log.md"
FIRST, LAST = "2026-12-01", "2026-12-04"
VERDICTS = ("agrees", "disagrees", "inconclusive")
UNMEASURED = ("failed", "cancelled")  # the jobs that ended without a measurement
SECONDS = (
    ("setup", "setup_s"),
    ("process start", "process_start_s"),
    ("warm-up", "warmup_s"),
    ("timing", "timing_s"),
    ("upstream's call", "upstream_s"),
)


def card(uuid: str) -> str:
    return uuid[:12] if uuid else "not recorded"


def jobs(folder: Path = FOLDER) -> list[dict]:
    """Every job started from FIRST to LAST, with the card of its run's measure job (`measured_on`)."""
    found = []
    for path in sorted(folder.glob("*.json.gz")):
        for entry in json.loads(gzip.decompress(path.read_bytes()))["runs"]:
            measures = [job for job in entry["jobs"] if job["kind"] == "measure"]
            measured_on = measures[0]["gpu_uuid"] if measures else ""
            for job in entry["jobs"]:
                day = (job["dates"].get("started_at") or "")[:10]
                if FIRST <= day <= LAST:
                    found.append({**job, "day": day, "measured_on": measured_on})
    return found


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def by_date_and_card(found: list[dict]) -> list[str]:
    counts = defaultdict(Counter)
    for job in found:
        counts[(job["day"], card(job["gpu_uuid"]))][job["kind"]] += 1
        counts[(job["day"], card(job["gpu_uuid"]))]["unmeasured"] += job["state"] in UNMEASURED
    rows = [
        [
            day,
            name,
            f"{count['measure']:,}",
            f"{count['rerun']:,}",
            f"{count['unmeasured']:,}",
        ]
        for (day, name), count in sorted(counts.items())
    ]
    total = Counter(job["kind"] for job in found)
    return [
        "## The cards, by date",
        "",
        f"Jobs started from {FIRST} to {LAST}: {total['measure']:,} measure jobs and {total['rerun']:,} "
        f"reruns on {len({job['gpu_uuid'] for job in found if job['gpu_uuid']})} cards. A job whose card "
        "is not recorded ended without a result that names it. Failed or cancelled: the jobs that "
        "ended without a measurement.",
        "",
        *table(["date", "card", "measure jobs", "reruns", "failed or cancelled"], rows),
        "",
    ]


def reruns_on_another_card(found: list[dict]) -> list[str]:
    counts = defaultdict(Counter)
    for job in found:
        if job["kind"] != "rerun" or not job["gpu_uuid"] or not job["measured_on"]:
            continue
        if job["gpu_uuid"] == job["measured_on"]:
            continue
        key = (job["day"], card(job["gpu_uuid"]), card(job["measured_on"]))
        counts[key][job["verdict"] or "no verdict"] += 1
    rows = [
        [
            day,
            rerun,
            measured,
            sum(count.values()),
            *(count[verdict] for verdict in VERDICTS),
            count["no verdict"],
        ]
        for (day, rerun, measured), count in sorted(counts.items())
    ]
    total = Counter()
    for count in counts.values():
        total.update(count)
    return [
        "## Reruns on another card",
        "",
        "Each card's reruns of runs that another card measured, by the verdict the shipped files "
        f"record: {sum(total.values()):,} reruns, {total['agrees']:,} agree, {total['disagrees']:,} "
        f"disagree, {total['inconclusive']:,} inconclusive, {total['no verdict']:,} without a verdict "
        "(failed or cancelled). `docs/reports/2026-12-04-h200-controlled-runs.md` gives what the "
        "verdicts mean for the runs.",
        "",
        *table(
            ["date", "rerun on", "measured on", "reruns", "agree", "disagree", "inconclusive", "no verdict"],
            rows,
        ),
        "",
    ]


def seconds_by_card(found: list[dict]) -> list[str]:
    sums = defaultdict(Counter)
    for job in found:
        sampling = job.get("sampling") or {}
        if not sampling.get("timing_s"):
            continue
        key = (job["day"], card(job["gpu_uuid"]))
        sums[key]["jobs"] += 1
        for _, field in SECONDS:
            sums[key][field] += sampling.get(field) or 0.0
    rows = []
    for (day, name), total in sorted(sums.items()):
        overhead = (total["setup_s"] + total["process_start_s"] + total["warmup_s"]) / total["timing_s"]
        rows.append(
            [day, name, total["jobs"], *(f"{total[field]:,.0f}" for _, field in SECONDS), f"{overhead:.0%}"]
        )
    return [
        "## Where each card's seconds went",
        "",
        "The harness's own record of each measured job (measure jobs and reruns), summed by date "
        "and card, in seconds; overhead is setup, process start and warm-up against timing. A "
        "fresh host's first jobs pay the compiles (fused_moe's autotune warm-up most of all).",
        "",
        *table(["date", "card", "jobs", *(name for name, _ in SECONDS), "overhead"], rows),
        "",
    ]


def hosts_log(path: Path = HOSTS_LOG) -> list[str]:
    quoted = [f"> {line}".rstrip() for line in path.read_text().strip().splitlines()]
    return [
        "## The hosts' log",
        "",
        f"What happened to each call, as the hosts' log (`{path.relative_to(ROOT)}`) has it, quoted: a "
        "log, not a result. Its figures were written from each call's output at the time and no "
        "script recomputes them; the tables above are the results.",
        "",
        *quoted,
        "",
    ]


def report(found: list[dict] | None = None, log: Path = HOSTS_LOG) -> str:
    found = jobs() if found is None else found
    head = [
        f"# The H200 sweep, {FIRST} to {LAST}, by date and card",
        "",
        "Written by `scripts/sweep_log_report.py` from the shipped controlled runs "
        "(`registry/data/controlled-runs/`) and the hosts' log; "
        "`tests/harness/test_sweep_log_report.py` checks that this file is what the script prints. "
        'What the hosts ran for `controlled_sweep` (`docs/gpu-hosts.md`, "The sweep"); '
        "`docs/reports/2026-12-04-h200-controlled-runs.md` gives the totals.",
        "",
    ]
    sections = (
        by_date_and_card(found) + reruns_on_another_card(found) + seconds_by_card(found) + hosts_log(log)
    )
    return "\n".join(head + sections).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(report())
