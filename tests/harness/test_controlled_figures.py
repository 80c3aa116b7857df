"""The report's figures for the shipped controlled runs (docs/reports/2026-12-04-h200-controlled-runs.md)
are the ones `scripts/controlled_figures.py` prints from the files today: shipping more runs without
the report's figures fails here."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reports" / "2026-12-04-h200-controlled-runs.md"


@pytest.fixture(scope="module")
def printed() -> str:
    script = ROOT / "scripts" / "controlled_figures.py"
    return subprocess.run([sys.executable, script], capture_output=True, text=True, check=True).stdout


def report() -> str:
    return " ".join(REPORT.read_text().split())


def number(pattern: str, text: str) -> list[int]:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the script's output"
    return [int(group) for group in match.groups()]


def test_the_report_gives_the_runs_kernels_and_verdicts_the_files_hold(printed):
    runs, kernels = number(r"runs under KernelIndex's protocols: (\d+), kernels: (\d+)", printed)
    total, agree = number(r"reruns with a verdict: (\d+) \(\d+ on the other card\); agree: (\d+)", printed)
    other_agree, other = number(r"on another card: (\d+) of (\d+) agree", printed)
    same_agree, same = number(r"on the same card: (\d+) of (\d+) agree", printed)
    (reproduced,) = number(r"'reproduced': (\d+)", printed)
    rerun_kernels, all_kernels = number(r"kernels with a run rerun on another card: (\d+) of (\d+)", printed)
    assert all_kernels == kernels

    text = report()
    assert f"Covered so far: {runs:,} runs of {kernels} kernels" in text
    assert f"Verdicts: {agree:,} of {total:,} reruns agree" in text
    assert f"On another physical card {other_agree:,} of {other:,} agree" in text
    assert f"same card {same_agree:,} of {same:,}" in text
    assert f"{reproduced:,} of the {runs:,} runs are `reproduced`" in text
    judged, reproduced_again = number(
        r"runs with a verdict on another card: (\d+); reproduced: (\d+)", printed
    )
    assert reproduced_again == reproduced
    assert f"of the {judged:,} runs with a verdict on another card, {reproduced:,} are `reproduced`" in text
    if rerun_kernels == kernels:
        assert f"All {kernels} mappable kernels have runs measured and rerun on another card" in text


def test_the_report_gives_the_spread_of_the_slow_workloads(printed):
    n, median, p95, within = re.search(
        r"1 ms or more: n=(\d+), median ([\d.]+)%, 95th percentile ([\d.]+)%, within 1%: (\d+)%", printed
    ).groups()
    text = report()
    assert f"speed workloads of 1 ms or more ({int(n):,}): median {float(median):.2f}%" in text
    assert f"95th percentile {float(p95):.1f}%; {within}% within 1%" in text
    for where, words in (
        ("on the same card", "on the card that measured the run"),
        ("on another card", "on another card"),
    ):
        n, median, p95, within = re.search(
            rf"1 ms or more, {where}: n=(\d+), median ([\d.]+)%, 95th percentile ([\d.]+)%, within 1%: (\d+)%",
            printed,
        ).groups()
        assert (
            f"{words} ({int(n):,}), median {float(median):.2f}%, 95th percentile {float(p95):.1f}%, "
            f"{within}% within 1%" in text
        )


def test_the_report_gives_how_far_apart_the_medians_on_two_cards_lie(printed):
    one, two, five, n = number(
        r"on another card, \|difference\| of medians within: 1% (\d+)%, 2% (\d+)%, 5% (\d+)% \(n=(\d+)\)",
        printed,
    )
    assert one <= two <= five
    unsettled, gap, gap_tenths, inside = number(
        r"of them inconclusive: (\d+), median \|difference\| (\d+)\.(\d)%, inside the 2% tolerance (\d+)%",
        printed,
    )
    assert (
        f"The {unsettled:,} inconclusive ones sit at the tolerance's edge (median |difference| "
        f"{gap}.{gap_tenths}%, {inside}% of them inside ±2%)" in report()
    )
    assert (
        f"Of the {n:,} latency reruns on another card, the two medians lie within 1% of each other in "
        f"{one}%, within 2% in {two}%, within 5% in {five}%" in report()
    )


def test_every_pair_offset_has_an_interval_around_its_median(printed):
    pairs = re.findall(r"median ([+-][\d.]+)%, 95% interval ([+-][\d.]+)% to ([+-][\d.]+)%", printed)
    assert pairs, "no pair of cards with enough reruns"
    for middle, low, high in pairs:
        assert float(low) <= float(middle) <= float(high)


def test_the_report_gives_the_seconds_of_the_slow_jobs(printed):
    jobs, total, excess, moe = number(
        r"over (\d+) jobs: (\d+); above their kernel's median in jobs over 8 s and 3x it: (\d+) \(fused_moe (\d+)",
        printed,
    )
    text = report()
    assert f"over all {jobs:,} shipped jobs ({total:,} s from start to finish)" in text
    assert f"spent {excess:,} s above that median, {moe:,} s of it fused_moe's" in text


def test_the_report_splits_the_latency_verdicts_by_the_hosts_pace(printed):
    text = report()
    for label, words in (
        ("host-paced or spin at its cap", "or whose spin reached its cap"),
        ("the others", "the others"),
    ):
        agree, disagree, inconclusive = number(
            rf"measurement or rerun {label}: agree / disagree / inconclusive (\d+) / (\d+) / (\d+)", printed
        )
        total = agree + disagree + inconclusive
        assert (
            f"{words} ({total:,}): {agree:,} agree, {disagree:,} disagree, {inconclusive:,} inconclusive"
            in text
        )
    read, any_paced, half_paced = number(
        r"latency jobs that read the host's pace: (\d+); with a host-paced call: (\d+); with half their "
        r"calls or more host-paced: (\d+)",
        printed,
    )
    assert (
        f"Of the {read:,} latency jobs that read it, {any_paced:,} had a host-paced call and "
        f"{half_paced:,} had half their calls or more host-paced" in text
    )


def test_the_reruns_doc_gives_the_scripts_runs_and_verdicts(printed):
    """docs/reruns.md, "What the shipped sweep found", quotes the script as the report does."""
    runs, kernels = number(r"runs under KernelIndex's protocols: (\d+), kernels: (\d+)", printed)
    (cards,) = number(r"physical cards: (\d+)", printed)
    total, agree = number(r"reruns with a verdict: (\d+) \(\d+ on the other card\); agree: (\d+)", printed)
    other_agree, other = number(r"on another card: (\d+) of (\d+) agree", printed)
    same_agree, same = number(r"on the same card: (\d+) of (\d+) agree", printed)
    judged, reproduced = number(r"runs with a verdict on another card: (\d+); reproduced: (\d+)", printed)
    text = " ".join((ROOT / "docs" / "reruns.md").read_text().split())
    for phrase in (
        f"({runs:,} runs of {kernels} kernels on {cards} physical cards;",
        f"{agree:,} of {total:,} reruns agree; on another physical card {other_agree:,} of {other:,}, "
        f"on the same card {same_agree:,} of {same:,}",
        f"{reproduced:,} of the {runs:,} runs are `reproduced`",
        f"(of the {judged:,} runs with a verdict on another card, {reproduced / judged:.0%};",
    ):
        assert phrase in text, f"docs/reruns.md lacks: {phrase}"
