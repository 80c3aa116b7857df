#!/usr/bin/env python3
"""Jobs sampled in independent blocks with NVML read through the timing, measured on one card and
each rerun on that card right after (`controlled_sweep --same-card-reruns`), as Markdown on
standard output: how often the rerun's median falls inside the measurement's 95% interval for a
rerun (the check of docs/protocol.md's interval on fresh data), and what the card's clocks, power
and clock-event reasons did while each block was timed.

    .venv/bin/python scripts/blocks_report.py > docs/reports/2026-12-06-h100-blocks.md

The files are the sweep's exports (`kernelindex-controlled-runs/v1`), kept in bench/results/
rather than registry/data/controlled-runs/: one card measured them, so none can be `reproduced`
until another card of the model reruns it. The interval's between-process component comes from
the shipped H200 verdict model (registry/data/verdict-model-nvidia-h200.json; the H100's, fitted on
KernelBench's sweeps, had no same-card reruns to fit one on), by the class each pair falls in; the report also gives the coverage without it, and the
component these reruns would ask for on their own. numpy, scipy and registry/stats; no Django.
"""

import dataclasses
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # registry.stats needs no Django
from registry.stats import shipped, verdict_model  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "blocks-h100"
MODEL = ROOT / "registry" / "data" / "verdict-model-nvidia-h200.json"
# A block is at the cap when a power limit is in half its readings or more (verdict_model).
HALF = 0.5


def same_card_rows(folder: Path) -> list[shipped.Rerun]:
    """Every same-card latency rerun of a block-sampled measurement in `folder`, GPU-timed."""
    return [
        row
        for row in shipped.reruns(folder)
        if row.pair.same_card and row.pair.old.blocks >= 3 and not row.host_bound
    ]


def latency_jobs(folder: Path) -> list[dict]:
    """Every latency job (measure and rerun) in `folder` that kept its blocks' NVML summaries."""
    return [
        job
        for entry in shipped.entries(folder)
        if entry["run"]["metric"] == "latency"
        for job in entry["jobs"]
        if isinstance((job.get("gpu_state") or {}).get("blocks"), list)
    ]


def _capped(block: dict) -> bool:
    reasons = block.get("reasons") or {}
    return any((reasons.get(limit) or 0) >= HALF for limit in verdict_model.POWER_LIMITS)


def _pct(share: float) -> str:
    return "—" if share is None or math.isnan(share) else f"{share:.1%}"


def _with_component(pair: verdict_model.Pair) -> verdict_model.Pair:
    """The pair with its measurement read as if its blocks were stretches of one process, so that
    the interval for a rerun adds the class's between-process component, as for older jobs."""
    return dataclasses.replace(pair, old=dataclasses.replace(pair.old, independent=False))


def _coverage_rows(model, rows: list[shipped.Rerun]) -> list[str]:
    lines = [
        "| band | same-card reruns | inside the interval for a rerun (the blocks) | with the H200 component added | median \\|difference\\| | 95th percentile |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for low, name in (*reversed(verdict_model.BANDS), (None, "all")):
        chosen = [r.pair for r in rows if low is None or verdict_model.band(r.pair.old.median) == name]
        chosen = [p for p in chosen if model.parameters(p.key) is not None]
        if not chosen:
            continue
        gaps = np.abs([math.expm1(p.log_ratio) for p in chosen])
        lines.append(
            f"| {name} | {len(chosen)} | {_pct(verdict_model.coverage(model, chosen))} | "
            f"{_pct(verdict_model.coverage(model, [_with_component(p) for p in chosen]))} | {np.median(gaps):.2%} | "
            f"{np.quantile(gaps, 0.95):.2%} |"
        )
    return lines


def _component_lines(model, rows: list[shipped.Rerun], gpu: str) -> list[str]:
    """The between-process component these reruns ask for on their own, beside the model's."""
    own = verdict_model.fit([r.pair for r in rows], gpu=gpu)
    lines = [
        "| class | same-card reruns | component they ask for | the H200 model's |",
        "| --- | --- | --- | --- |",
    ]
    counts = Counter(r.pair.key for r in rows)
    for key in sorted(counts):
        params, theirs = own.parameters(key), model.parameters(key)
        lines.append(
            f"| {verdict_model.class_words(key)} | {counts[key]} | {params.process_sd:.2%} ({params.process_from}) | "
            f"{'—' if theirs is None else f'{theirs.process_sd:.2%}'} |"
        )
    return lines


def _nvml_lines(jobs: list[dict]) -> list[str]:
    blocks = [block for job in jobs for block in job["gpu_state"]["blocks"]]
    rates = [b["hz"] for b in blocks if isinstance(b.get("hz"), int | float)]
    readings = [b["readings"] for b in blocks if isinstance(b.get("readings"), int)]
    clocks = [b["sm_clock_mhz"]["min"] for b in blocks if isinstance(b.get("sm_clock_mhz"), dict)]
    capped_jobs = [job for job in jobs if any(_capped(b) for b in job["gpu_state"]["blocks"])]
    mixed = [job for job in capped_jobs if not all(_capped(b) for b in job["gpu_state"]["blocks"])]
    stale = sum(1 for job in jobs if "before" in job["gpu_state"] or "after" in job["gpu_state"])
    return [
        f"- {len(jobs)} latency jobs, {len(blocks)} blocks; every block read while it was timed: "
        f"{min(readings)} to {max(readings)} readings a block (median {statistics.median(readings):g}), at "
        f"{min(rates):.1f} to {max(rates):.1f} readings a second (median {statistics.median(rates):.1f}; "
        "the sampler asks for 20).",
        f"- No job keeps a reading from before its setup or after its pass ({stale} do).",
        f"- {len(capped_jobs)} jobs have a block at the power cap (a limit in half its readings or more); "
        f"in {len(mixed)} of them the cap held in some blocks and not in others: it arrived or left within "
        "the job, which a reading before and after the timing could not show.",
        f"- The SM clock's lowest reading in a block: {min(clocks)} to {max(clocks)} MHz "
        f"(median {statistics.median(clocks):g}).",
    ]


def _cap_lines(rows: list[shipped.Rerun], folder: Path) -> list[str]:
    """Same-card pairs by whether the two jobs met the cap alike: the cap per block, per pair."""
    state = {}
    for entry in shipped.entries(folder):
        for job in entry["jobs"]:
            blocks = (job.get("gpu_state") or {}).get("blocks")
            if isinstance(blocks, list):
                state[
                    (entry["run"]["external_id"], job["kind"], (job.get("dates") or {}).get("started_at"))
                ] = sum(_capped(b) for b in blocks) / len(blocks) if blocks else 0.0
    measured = {key[0]: share for key, share in state.items() if key[1] == "measure"}
    alike, unlike = [], []
    for row in rows:
        rerun_share = state.get((row.run, "rerun", row.started_at))
        if rerun_share is None or row.run not in measured:
            continue
        (alike if rerun_share == measured[row.run] else unlike).append(abs(math.expm1(row.pair.log_ratio)))
    if not alike or not unlike:
        return []
    return [
        f"- Same-card pairs whose two jobs had the same share of blocks at the cap: {len(alike)}, median "
        f"|difference| {np.median(alike):.2%}, 95th percentile {np.quantile(alike, 0.95):.2%}; pairs whose jobs "
        f"met the cap in different shares of their blocks: {len(unlike)}, {np.median(unlike):.2%} and "
        f"{np.quantile(unlike, 0.95):.2%}.",
    ]


def report(folder: Path = RESULTS, model_path: Path = MODEL) -> str:
    model = verdict_model.Model.from_json(json.loads(model_path.read_text()))
    rows = same_card_rows(folder)
    jobs = latency_jobs(folder)
    cards = sorted({job["gpu_uuid"] for job in jobs})
    products = sorted({job["environment"]["gpu_name"] for job in jobs})
    kernels = sorted({row.pair.kernel for row in rows})
    dates = sorted((job.get("dates") or {}).get("started_at", "")[:10] for job in jobs)
    every = [row for row in shipped.reruns(folder) if row.pair.same_card]
    lines = [
        f"# Independent blocks and NVML through the timing: {', '.join(products)}, {dates[0]}",
        "",
        "Written by `.venv/bin/python scripts/blocks_report.py` from the sweep's exports in "
        f"`{folder.relative_to(ROOT)}/` (tests/harness/test_blocks_report.py checks it against the script).",
        "",
        f"On {dates[0]} one {', '.join(products)} ({', '.join(c[:12] for c in cards)}) measured every "
        f"target of {len(kernels)} kernels ({', '.join(kernels)}) under `kernelindex-cuda-v1` in three "
        "independent blocks, with NVML read through each block's timing, and reran each on the same card "
        "right after (`controlled_sweep --same-card-reruns`). "
        f"{len(every)} latency reruns; {len(every) - len(rows)} whose figure includes the host's pace are "
        f"left out below, leaving {len(rows)} GPU-timed pairs. One card measured them all, so none is "
        "`reproduced` and they are not loaded as runs; they check the interval and the sampler.",
        "",
        "## The interval for a rerun, on fresh jobs",
        "",
        "How often the rerun's median falls inside the measurement's 95% interval for a rerun "
        "(`verdict_model.rerun_interval`). A job sampled in independent blocks carries the spread "
        "between processes in its blocks, so its interval is the between-block variance of both "
        "jobs alone; beside it, the interval an older job of consecutive stretches gets, with the "
        "class's between-process component of the H200 model added once for each process. An "
        "honest 95% interval covers 85–99% of them (issue 35's goal).",
        "",
        *_coverage_rows(model, rows),
        "",
        "The between-process component these same-card reruns ask for on their own (fitted as the "
        "model fits it: the least σ that puts 95% of them within ±1.96 standard errors), beside the "
        "H200 model's:",
        "",
        *_component_lines(model, rows, gpu=cards[0] if cards else ""),
        "",
        "## NVML through the timing",
        "",
        *_nvml_lines(jobs),
        *_cap_lines(rows, folder),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
