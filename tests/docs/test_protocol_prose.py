"""The measured figures of docs/protocol.md's prose outside "Verdicts by class" (that section is
tests/stats/test_protocol_figures.py's) are the ones the bundled data, the shipped controlled runs
and their scripts give today: a figure changed in the prose, or data shipped that changes it, fails
here until the two agree (STYLE.md, "README and docs")."""

import csv
import json
import re
import subprocess
import sys
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest

from registry.stats.shipped import entries
from tests.docs.commands import ROOT
from tests.scripts import load_script

DOC = ROOT / "docs" / "protocol.md"
RUNS = ROOT / "registry" / "data" / "controlled-runs"
BUNDLED = ROOT / "registry" / "sources" / "liger" / "data" / "all_benchmark_data.csv"
SINCE = "2026-12-01T10:00"


def prose() -> str:
    return " ".join(DOC.read_text(encoding="utf-8").split())


def _script(name: str):
    return load_script(name)


@pytest.fixture(scope="module")
def shipped() -> list[dict]:
    return list(entries(RUNS))


@pytest.fixture(scope="module")
def printed() -> str:
    script = ROOT / "scripts" / "controlled_figures.py"
    return subprocess.run(
        [sys.executable, script, "--since", SINCE], capture_output=True, text=True, check=True
    ).stdout


def found(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the script's output"
    return match.groups()


def family(entry: dict) -> str:
    return entry["protocol"]["comparability_family"]


def started(job: dict) -> str:
    return (job.get("dates") or {}).get("started_at") or ""


def test_the_bundled_speed_rows_timed_once():
    with BUNDLED.open(newline="", encoding="utf-8") as handle:
        speed = [row for row in csv.DictReader(handle) if row["metric_name"] == "speed"]
    once = sum(row["y_value_20"] == row["y_value_50"] == row["y_value_80"] for row in speed)
    assert f"({once:,} of the {len(speed):,} speed rows of the bundled data)" in prose()


def test_the_first_latency_jobs_that_read_the_host_pace(shipped):
    host_paced = _script("controlled_figures")._host_paced
    read = sorted(
        (started(job), job)
        for entry in shipped
        if entry["run"]["metric"] == "latency"
        for job in entry["jobs"]
        if isinstance((job.get("sampling") or {}).get("host_paced_samples"), int)
    )
    first = 245  # the doc's count: the jobs shipped with a host pace by the time it was written
    jobs = [job for _, job in read[:first]]
    assert {when[:10] for when, _ in read[:first]} == {"2026-12-04"}
    any_call = sum(job["sampling"]["host_paced_samples"] > 0 for job in jobs)
    half = sum(host_paced(job) for job in jobs)
    assert (
        f"of the first {first} latency jobs that read it (2026-12-04), {any_call} had a host-paced call "
        f"and {half} had half or more" in prose()
    )


def test_the_first_memory_family_disagreed_by_workspaces(shipped):
    first = [
        entry
        for entry in shipped
        if family(entry) == "kernelindex/liger-peak-memory"
        # runs of the older protocol (no sampling on the measure job) are judged under their own
        and all(job.get("sampling") for job in entry["jobs"] if job["kind"] == "measure")
    ]
    judged = [
        (entry, job) for entry in first for job in entry["jobs"] if job["kind"] == "rerun" and job["verdict"]
    ]
    disagree = [(entry, job) for entry, job in judged if job["verdict"] == "disagrees"]
    text = prose()
    assert f'Of its {len(judged)} judged memory reruns, {len(disagree)} "disagree"' in text

    spread = 0.0
    pairs = set()
    for entry, job in disagree:
        measure = next(job for job in entry["jobs"] if job["kind"] == "measure")
        step = round(abs(entry["run"]["median"] - job["median"]))
        assert 32 <= step <= 33 or 64 <= step <= 66, (entry["kernel"]["slug"], step)
        spread = max(spread, *(max(j["samples"]) - min(j["samples"]) for j in (measure, job)))
        pairs.add((entry["kernel"]["slug"], round(entry["run"]["median"]), round(job["median"])))
    assert "one or two steps of 32–33 MiB" in text
    assert f"({spread:.0f} MiB at most)" in text
    for slug, measured, rerun in [
        ("softmax", 75, 42),
        ("softmax", 75, 10),
        ("sparse_multi_token_attention", 64, 32),
        ("sparsemax", 104, 72),
        ("cross_entropy", 2113, 2048),
        ("embedding", 170, 137),
    ]:
        assert (slug, measured, rerun) in pairs
    assert (
        "softmax 75 MiB measured and 42 or 10 MiB rerun, sparse multi-token attention 64 and 32 MiB, "
        "sparsemax 104 and 72 MiB, cross entropy 2,113 and 2,048 MiB, embedding 170 and 137 MiB" in text
    )


def test_the_reset_on_the_first_v2_card(shipped):
    card = "GPU-0f69bd63"
    runs = [
        entry
        for entry in shipped
        if family(entry) == "kernelindex/liger-peak-memory-v2"
        and any(
            job["kind"] == "measure"
            and started(job).startswith("2026-12-02")
            and (job.get("gpu_uuid") or "").startswith(card)
            for job in entry["jobs"]
        )
    ]
    on_card = [
        job
        for entry in shipped
        if family(entry) == "kernelindex/liger-peak-memory-v2"
        for job in entry["jobs"]
        if started(job).startswith("2026-12-02") and (job.get("gpu_uuid") or "").startswith(card)
    ]
    freed = [job["sampling"]["workspaces_freed_mb"] for job in on_card]
    some = [mb for mb in freed if mb]
    elsewhere = [
        job
        for entry in runs
        for job in entry["jobs"]
        if job["kind"] == "rerun" and job["verdict"] and (job.get("sampling") or {}).get("same_gpu") is False
    ]
    assert not [job for job in elsewhere if job["verdict"] == "disagrees"]
    assert (
        f"On the H200 {card} (2026-12-02, {len(runs)} v2 runs measured, {len(on_card)} jobs on that card) "
        f"the reset freed {min(some):.0f} to {max(some):.0f} MiB in {len(some)} jobs and nothing in "
        f"{freed.count(0)}, and none of those runs' {len(elsewhere)} reruns on another card disagrees"
    ) in prose()


def test_the_memory_verdicts_judged_again(shipped):
    memory = [entry for entry in shipped if entry["run"]["metric"] == "memory"]

    def was_inconclusive(job: dict) -> bool:
        earlier = (job.get("sampling") or {}).get("earlier_judgements") or []
        return any(judgement["verdict"] == "inconclusive" for judgement in earlier)

    flipped = [job for entry in memory for job in entry["jobs"] if was_inconclusive(job)]
    assert {job["verdict"] for job in flipped} == {"agrees"}
    with_readings = [job for entry in memory for job in entry["jobs"] if len(job.get("samples") or []) > 10]
    became = 0
    for entry in memory:
        mine = [job for job in entry["jobs"] if was_inconclusive(job)]
        agreeing = [
            job
            for job in entry["jobs"]
            if job["kind"] == "rerun"
            and job["verdict"] == "agrees"
            and (job.get("sampling") or {}).get("same_gpu") is False
        ]
        # reproduced by a verdict that was inconclusive, and by no other rerun on another card
        became += bool(agreeing) and all(job in mine for job in agreeing)
    text = prose()
    assert f"every one of the {len(flipped)} inconclusive memory verdicts came from such a job" in text
    assert f"all {len(with_readings)} such shipped jobs" in text
    counts = [len(job["samples"]) for job in with_readings]
    assert f"({min(counts)} to {max(counts)} instead of 10, the extra ones first and lower)" in text
    assert f"all {len(flipped)} agree and {became} runs became `reproduced`" in text


def test_where_the_host_seconds_go(printed):
    after = found(
        rf"over (\d+) measure jobs started from {SINCE}: process start (\d+), setup (\d+), "
        r"upstream call \d+, warm-up (\d+), timing (\d+); overhead / timing (\d+)%",
        printed,
    )
    jobs, start, setup, warmup, timing, overhead = (int(value) for value in after)
    before = found(
        rf"over (\d+) measure jobs started before {SINCE}: process start \d+, setup (\d+), "
        r"upstream call \d+, warm-up \d+, timing (\d+)",
        printed,
    )
    earlier, earlier_setup, earlier_timing = (int(value) for value in before)
    text = prose()
    assert (
        f"{jobs:,} measure jobs spent {setup:,} s in setup, {warmup} s warming up and {timing:,} s timing "
        f"(overhead, with {start} s of process starts, {overhead}% of timing" in text
    )
    assert (
        f"the {earlier} before spent {earlier_setup} s in setup (the losses' heads built on the CPU) "
        f"against {earlier_timing} s of timing" in text
    )


def test_the_latency_verdicts_judged_again_with_batches(shipped):
    changed = Counter()
    for entry in shipped:
        if entry["run"]["metric"] != "latency":
            continue
        for job in entry["jobs"]:
            for earlier in (job.get("sampling") or {}).get("earlier_judgements") or []:
                if earlier["judged_at"].startswith("2026-12-01") and earlier["verdict"] != job["verdict"]:
                    changed[(earlier["verdict"], job["verdict"])] += 1
    assert (
        f"{sum(changed.values())} verdicts changed, {changed[('agrees', 'inconclusive')]} `agrees` and "
        f"{changed[('disagrees', 'inconclusive')]} `disagrees` to `inconclusive` and "
        f"{changed[('inconclusive', 'agrees')]} `inconclusive` to `agrees`; no measurement changed"
    ) in prose()


@pytest.fixture(scope="module")
def drift() -> str:
    script = ROOT / "bench" / "warmup_drift.py"
    folder = ROOT / "bench" / "results" / "warmup-drift"
    return subprocess.run(
        [sys.executable, script, "--analyse", folder], capture_output=True, text=True, check=True
    ).stdout


def test_the_warm_up_table_is_the_analysis(drift):
    (workloads,) = found(r"workloads: (\d+), measured on two cards: \d+", drift)
    text = prose()
    assert f"(one per kernel, {workloads} with the reference workload)" in text
    for warmup, label in ((0.025, "25 ms (the protocol's)"), (0.25, "250 ms"), (1.0, "1 s"), (2.0, "2 s")):
        median, one, two = found(rf"\n\s*{warmup:.3f} s\s+([\d.]+%)\s+[\d.]+%\s+(\d+%)\s+(\d+%)", drift)
        assert f"| {label} | {median} | {one} | {two} |" in text


def test_the_power_cap_in_the_drift_samples():
    results = []
    for path in sorted((ROOT / "bench" / "results" / "warmup-drift").glob("gpu*.json")):
        results.append(json.loads(path.read_text())["results"])
    reference = [
        next(
            r
            for r in card
            if (r["kernel"], r["provider"], r["operation_mode"]) == ("geglu", "liger", "backward")
        )
        for card in results
    ]
    samples = np.array(reference[0]["samples"])
    sixteenth = samples.size // 16
    first, last = np.median(samples[:sixteenth]), np.median(samples[-sixteenth:])
    capped = [
        r["gpu_state"]["after"]
        for card in results
        for r in card
        if r["status"] == "ok"
        and "sw_power_cap" in str(r["gpu_state"]["after"])
        and r["gpu_state"]["after"]["sm_clock_mhz"] < 1900
    ]
    clocks = [state["sm_clock_mhz"] for state in capped]
    unloaded = max(
        r["gpu_state"]["before"]["sm_clock_mhz"] for card in results for r in card if r["status"] == "ok"
    )
    power = np.median([state["power_w"] for state in capped])
    text = prose()
    assert f"({round(power, -1):.0f} W, `sw_power_cap`" in text  # the prose gives the cap to the nearest 10 W
    assert f"SM clock down from {unloaded:,} to {min(clocks):,}–{max(clocks):,} MHz" in text
    assert (
        f"runs at {first:.1f} ms in its first sixteenth and {last:.1f} ms in its last on the first card"
        in text
    )


def test_the_reruns_between_hosts_by_band(printed):
    text = prose()
    bands = {}
    for label, name in (
        ("under 25 us", "under 25 µs"),
        ("25-100 us", "25–100 µs"),
        ("0.1-1 ms", "0.1–1 ms"),
        ("1-10 ms", "1–10 ms"),
        ("10 ms or more", "10 ms or more"),
    ):
        values = [
            int(v)
            for v in found(rf"  {re.escape(label)}\s+" + r" / ".join([r"(\d+) \((\d+)\)"] * 3), printed)
        ]
        agree, agree_same = values[0], values[1]
        other, same = sum(values[0::2]), sum(values[1::2])
        bands[name] = (agree, other)
        assert (
            f"{name} {agree} of {other} ({'the same card: ' if len(bands) == 1 else ''}{agree_same} of {same})"
            in text
        )
    agree, total = sum(a for a, _ in bands.values()), sum(n for _, n in bands.values())
    assert f"latency reruns on another card agree in {agree:,} of {total:,} cases overall" in text


def _pairs(printed: str, small: bool) -> list[tuple[float, float, float, int, int]]:
    heading = "under 0.1 ms" if small else "1 ms or more"
    block = printed.split(f"latency workloads {heading}")[1].split("\n", 1)[1]
    rows = []
    for line in block.splitlines():
        match = re.match(
            r"  GPU-\w+ / GPU-\w+: n=(\d+), median ([+-][\d.]+)%, 95% interval ([+-][\d.]+)% to ([+-][\d.]+)%, "
            r"(\d+)% of reruns",
            line,
        )
        if not match:
            break
        n, median, low, high, share = match.groups()
        rows.append((float(median), float(low), float(high), int(n), int(share)))
    return rows


def _signed(printed: float) -> str:
    """A printed percentage (two decimals) as the prose quotes it: one decimal, halves up."""
    tenths = Decimal(f"{abs(printed):.2f}").quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return f"{'−' if printed < 0 else '+'}{tenths}%"


def test_the_steady_offsets_between_pairs_of_cards(printed):
    text = prose()
    small, large = _pairs(printed, True), _pairs(printed, False)
    clear = [row for row in small if row[1] > 0 or row[2] < 0]
    assert f"Under 0.1 ms {len(clear)} of {len(small)} pairs sit clear of zero" in text
    quoted = re.findall(
        r"([+−][\d.]+%) \(([+−][\d.]+%) to ([+−][\d.]+%), (\d+)(?: reruns)?(?:, (\d+)% of them|, all of)?",
        text,
    )
    rows = {(_signed(m), _signed(lo), _signed(hi), n): share for m, lo, hi, n, share in small}
    checked = 0
    for median, low, high, n, share in quoted:
        if (median, low, high, int(n)) in rows:
            checked += 1
            assert not share or int(share) == rows[(median, low, high, int(n))]
    assert checked == 6
    reach = [row for row in large if row[1] <= 0 <= row[2]]
    assert f"At 1 ms or more {len(reach)} of {len(large)} pairs' intervals reach zero" in text


def test_how_far_apart_all_told(printed):
    one, two, five, n = found(r"within: 1% (\d+)%, 2% (\d+)%, 5% (\d+)% \(n=(\d+)\)", printed)
    unsettled, median, inside = found(
        r"of them inconclusive: (\d+), median \|difference\| ([\d.]+)%, inside the 2% tolerance (\d+)%",
        printed,
    )
    (cards,) = found(r"physical cards: (\d+)", printed)
    paced = [
        int(v)
        for v in found(
            r"host-paced or spin at its cap: agree / disagree / inconclusive (\d+) / (\d+) / (\d+)", printed
        )
    ]
    others = [
        int(v) for v in found(r"the others: agree / disagree / inconclusive (\d+) / (\d+) / (\d+)", printed)
    ]
    edge = [row for row in _pairs(printed, False) if (row[0], row[1], row[2]) == (-1.89, -2.37, -1.43)]
    text = prose()
    assert cards == "25" and "twenty-five cards" in text
    assert "(1,654 by 2026-12-04, twenty-five cards)" in text and int(n) == 1654
    assert f"within 1% of each other in {one}%, within 2% in {two}%, within 5% in {five}%" in text
    assert f"at most {two}% could agree" in text
    assert (
        f"the {unsettled} inconclusive verdicts sit at the tolerance's edge (median |difference| {median}%, {inside}% of them inside it)"
        in text
    )
    assert f"agree in {paced[0]} of {sum(paced)}; the others in {others[0]} of {sum(others):,}" in text
    assert len(edge) == 1 and edge[0][3:] == (27, 96)
    assert "runs 1.89% apart (95% interval 1.43% to 2.37%, 27 reruns, 96% of them the same way)" in text


def test_the_fused_moe_warm_up(shipped):
    card = "GPU-ab5aef2e"
    liger = [
        entry
        for entry in shipped
        if entry["kernel"]["slug"] == "fused_moe" and entry["implementation"]["provider"] == "liger"
    ]

    def measure(entry: dict) -> dict:
        return next(job for job in entry["jobs"] if job["kind"] == "measure")

    missed = {
        (entry["workload"]["slug"], entry["run"]["operation_mode"], entry["run"]["metric"])
        for entry in liger
        if not (measure(entry).get("sampling") or {}).get("upstream_warmup")
    }

    def latency(t: int, mode: str, warmed: bool) -> list[dict]:
        return [
            entry
            for entry in liger
            if entry["run"]["metric"] == "latency"
            and entry["workload"]["x_value"] == t
            and entry["run"]["operation_mode"] == mode
            and bool((measure(entry).get("sampling") or {}).get("upstream_warmup")) == warmed
            and (not warmed or measure(entry)["gpu_uuid"].startswith(card))
        ]

    on_card = sorted(
        (started(job), job["sampling"]["setup_s"])
        for entry in liger
        for job in entry["jobs"]
        if (job.get("gpu_uuid") or "").startswith(card) and (job.get("sampling") or {}).get("upstream_warmup")
    )
    first_setup = on_card[0][1]
    later = [setup for _, setup in on_card[1:] if setup > 10]
    with BUNDLED.open(newline="", encoding="utf-8") as handle:
        bundled = {
            (int(row["x_value"]), row["kernel_operation_mode"]): float(row["y_value_50"])
            for row in csv.DictReader(handle)
            if row["kernel_name"] == "fused_moe"
            and row["kernel_provider"] == "liger"
            and row["metric_name"] == "speed"
            and '"sweep_dim": "T"' in row["extra_benchmark_config_str"]
        }
    warm = [measure(latency(t, "full", True)[0]) for t in (128, 256)]
    cold = [latency(t, "full", False)[0] for t in (128, 256)]
    forward = measure(latency(128, "forward", True)[0])
    (forward_cold,) = latency(128, "forward", False)
    text = prose()
    assert f"Those runs ({len(missed)} targets)" in text
    assert f"the warm-up took {first_setup:.0f} s the first time on a host" in text
    assert f"then about {np.median(later):.0f} s in each new worker process" in text
    assert (
        "measured {:.2f} and {:.2f} ms (medians of {} and {} calls), beside upstream's own {:.2f} and {:.2f} ms "
        "on an H100 in the bundled data; the runs measured without it had {:.2f} and {:.2f} ms on two other cards"
    ).format(
        *(np.median(job["samples"]) for job in warm),
        *(len(job["samples"]) for job in warm),
        bundled[(128, "full")],
        bundled[(256, "full")],
        *(entry["run"]["median"] for entry in cold),
    ) in text
    assert len({measure(entry)["gpu_uuid"] for entry in cold}) == 2
    samples = forward["samples"]
    assert (
        f"(T = 128: {len(samples)} calls from {min(samples):.2f} to {max(samples):.2f} ms, median "
        f"{np.median(samples):.2f} ms, against {forward_cold['run']['median']:.2f} ms without the warm-up)"
    ) in text


def test_the_offset_cards_ran_at_full_clock(shipped):
    # the cards of the first three pairs the prose quotes under 0.1 ms
    cards = ("GPU-658b24c4", "GPU-f1b755d7", "GPU-59ac5df4", "GPU-ade435ab", "GPU-d5ae527f")
    clocks = {
        job["gpu_state"]["after"]["sm_clock_mhz"]
        for entry in shipped
        if entry["run"]["metric"] == "latency" and entry["run"]["median"] < 0.1
        for job in entry["jobs"]
        if (job.get("gpu_uuid") or "").startswith(cards)
        and isinstance((job.get("gpu_state") or {}).get("after"), dict)
    }
    (clock,) = clocks
    assert f"the SM clock of each of their cards read {clock:,} MHz after every job under 0.1 ms" in prose()
