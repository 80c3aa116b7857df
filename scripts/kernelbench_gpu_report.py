#!/usr/bin/env python3
"""What KernelIndex's GPU hosts measured of KernelBench's problems, from the shipped sweep files
(registry/sources/kernelbench/data/gpu/*.jsonl.gz, as `gpu_sweep` wrote them), as Markdown on
standard output. No Django and no database: the figures come from the files alone, with the
statistics the registry uses (registry/stats).

    .venv/bin/python scripts/kernelbench_gpu_report.py > docs/reports/2026-12-06-h200-h100-kernelbench.md

Per card (with its GPU model): the problems measured under each level and implementation; how
the NVML sampler read the card while each block was timed; how far each block's median lay from
the job's; KernelIndex's median against upstream's own figure (the mean of 100 calls without an
L2 flush) taken in the same process. Across cards of one GPU model, for each problem and
implementation measured on two (the later measurement against the first, as the registry records
it: a rerun of that run): the relative difference of the medians and its 95% interval from the
two jobs' between-block variance alone (registry.stats.intervals.difference), how many of those
intervals lie within ±2%, per pair of cards, and the pairs whose interval does not.
"""

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.sources.kernelbench.gpu_sweep import GPU_DIR  # noqa: E402
from registry.stats import intervals  # noqa: E402


def entries(folder: Path = GPU_DIR) -> list[dict]:
    found = []
    for file in sorted(folder.glob("*.jsonl.gz")):
        for line in gzip.decompress(file.read_bytes()).decode().splitlines():
            entry = json.loads(line)
            entry["file"] = file.name
            found.append(entry)
    return found


def block_offsets(result: dict) -> list[float]:
    """Each block's median relative to the job's median."""
    samples, blocks = result["samples"], result["sampling"]["sample_blocks"]
    median = statistics.median(samples)
    return [
        statistics.median([s for s, b in zip(samples, blocks, strict=True) if b == block]) / median - 1
        for block in sorted(set(blocks))
    ]


def estimate(result: dict) -> intervals.MedianEstimate:
    return intervals.median_estimate(result["samples"], block_ids=result["sampling"]["sample_blocks"])


def percent(value: float, digits: int = 1) -> str:
    return f"{value * 100:+.{digits}f}%"


def card_section(card: str, measured: list[dict]) -> list[str]:
    by_impl = defaultdict(int)
    for entry in measured:
        by_impl[f"{entry['level']} {entry['implementation']}"] += 1
    readings, rates, capped, offsets, versus_upstream = [], [], 0, [], []
    for entry in measured:
        result = entry["result"]
        for block in result["gpu_state"].get("blocks", []):
            if block.get("readings"):
                readings.append(block["readings"])
                if block["readings"] >= 2 and block.get("hz"):  # one reading has no rate
                    rates.append(block["hz"])
        capped += bool(result["gpu_state"].get("throttled"))
        offsets += [abs(x) for x in block_offsets(result)]
        versus_upstream.append(result["upstream"]["mean"] / result["median"] - 1)
    dates = sorted(entry["finished_at"] for entry in measured)
    lines = [
        f"### {card} ({measured[0]['result']['environment']['gpu_name']})",
        "",
        f"{len(measured)} measurements from {dates[0]} to {dates[-1]} ("
        + ", ".join(f"{n} {impl}" for impl, n in sorted(by_impl.items()))
        + ").",
        "",
        f"- NVML read while timing: {len(readings)} blocks, a median of {statistics.median(readings):.0f} "
        f"reading(s) a block (least {min(readings)}, most {max(readings)}; a block is often shorter "
        f"than the sampler's 50 ms period), at a median {statistics.median(rates) if rates else 0:.1f} Hz "
        f"where a block had two or more; a slow-down reason (`sw_power_cap` and the like) seen "
        f"while timing in {capped} of {len(measured)} jobs.",
        f"- Each block's median against its job's: median |offset| {statistics.median(offsets) * 100:.2f}%, "
        f"95th percentile {np.percentile(offsets, 95) * 100:.2f}%, most {max(offsets) * 100:.2f}% "
        f"({len(offsets)} blocks).",
        f"- Upstream's figure (mean of 100 calls, no L2 flush) against KernelIndex's median in the same "
        f"process: median {percent(statistics.median(versus_upstream))}, from "
        f"{percent(min(versus_upstream))} to {percent(max(versus_upstream))}.",
        "",
    ]
    return lines


def pairs_section(pairs: list[tuple[dict, dict]]) -> list[str]:
    if not pairs:
        return ["No problem was measured on two cards of one GPU model.", ""]
    by_cards, outside = defaultdict(list), []
    for first, second in pairs:
        judged = intervals.difference(estimate(second["result"]), estimate(first["result"]))
        within = -0.02 <= judged.low and judged.high <= 0.02
        by_cards[(card_of(first), card_of(second))].append((abs(judged.point), within))
        if not within:
            outside.append(
                f"| {first['level']} | {first['problem']} | {first['implementation']} | {card_of(first)} | "
                f"{first['result']['median']:.4g} | {card_of(second)} | {second['result']['median']:.4g} | "
                f"{percent(judged.point, 2)} | {percent(judged.low, 2)} to {percent(judged.high, 2)} |"
            )
    differences = [abs(s["result"]["median"] / f["result"]["median"] - 1) for f, s in pairs]
    lines = [
        f"{len(pairs)} problem and implementation pairs measured on two cards of one GPU model. "
        f"|difference| of the medians: median {statistics.median(differences) * 100:.2f}%, 95th "
        f"percentile {np.percentile(differences, 95) * 100:.2f}%, most {max(differences) * 100:.2f}%. "
        f"The 95% interval from the two jobs' between-block variance alone lies within ±2% for "
        f"{len(pairs) - len(outside)} of {len(pairs)}; the registry's verdict adds the card-to-card "
        f"margin of its class (`docs/protocol.md`), so this is the interval before that margin.",
        "",
        "| first card | second card | pairs | median absolute difference | interval within ±2% |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (first, second), found in by_cards.items():
        lines.append(
            f"| {first} | {second} | {len(found)} | "
            f"{statistics.median(d for d, _ in found) * 100:.2f}% | {sum(w for _, w in found)} |"
        )
    lines += [""]
    if outside:
        lines += [
            "The pairs whose interval is not within ±2%:",
            "",
            "| level | problem | implementation | first card | ms | second card | ms | difference "
            "| 95% interval |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *outside,
            "",
        ]
    return lines


def pairs_of(measured: list[dict]) -> list[tuple[dict, dict]]:
    """Each later measurement of a problem and implementation on another card of the same GPU
    model, with the first one (as the registry records it: a rerun of that run)."""
    first_of, pairs = {}, []
    for entry in sorted(measured, key=lambda e: e["finished_at"]):
        key = (entry["result"]["environment"]["gpu_name"], entry["sha256"], entry["implementation"])
        if key not in first_of:
            first_of[key] = entry
        elif entry["result"]["gpu_uuid"] != first_of[key]["result"]["gpu_uuid"]:
            pairs.append((first_of[key], entry))
    return pairs


def card_of(entry: dict) -> str:
    return entry["result"]["gpu_uuid"][:12]


def report(found: list[dict]) -> str:
    measured = [entry for entry in found if entry.get("result")]
    failed = [entry for entry in found if not entry.get("result")]
    cards = defaultdict(list)
    for entry in measured:
        cards[card_of(entry)].append(entry)
    environment = measured[0]["result"]["environment"] if measured else {}
    models = defaultdict(set)
    for card, on_card in cards.items():
        models[on_card[0]["result"]["environment"]["gpu_name"]].add(card)
    lines = [
        "# KernelBench's problems on KernelIndex's GPU hosts, by card",
        "",
        "Written by `.venv/bin/python scripts/kernelbench_gpu_report.py` from the shipped sweep files "
        "(`registry/sources/kernelbench/data/gpu/`); `docs/sources.md` says how a GPU host makes them. "
        f"Host software: torch {environment.get('torch', '?')}, Python {environment.get('python', '?')}. "
        "KernelBench publishes no H200 figure: those are the first. Its own H100 figures were timed by "
        "its own harness (the mean of 100 calls, no L2 flush), which each job here repeats beside "
        "KernelIndex's median.",
        "",
        f"{len(measured)} measurements on {len(cards)} card{'s' if len(cards) != 1 else ''} ("
        + ", ".join(f"{name}: {len(found)}" for name, found in sorted(models.items()))
        + f"); {len(failed)} problems failed on the host.",
        "",
        "## By card",
        "",
    ]
    for card, on_card in sorted(cards.items(), key=lambda item: min(e["finished_at"] for e in item[1])):
        lines += card_section(card, on_card)
    lines += ["## Across cards", "", *pairs_section(pairs_of(measured))]
    if failed:
        lines += ["## Failed on the host", ""]
        lines += [
            f"- {e['level']}/{e['problem']} ({e['implementation']}): {e['error'][:200]}" for e in failed
        ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report(entries()))
