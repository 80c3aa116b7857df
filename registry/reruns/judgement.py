"""The verdict on new figures of a run's workload, judged against the run under the run's own
protocol: one function for a controlled rerun (services/record.py) and for a contributor's
result file (attestations/services.py). Imports no service, so both can use it.
"""

import math
from dataclasses import dataclass

from django.conf import settings

from registry.models import BenchmarkRun, JobKind, Metric, RerunJob, Verdict
from registry.reruns.harness import MEMORY_FAMILY, stats

SAMPLES_LIMIT = 20_000  # the most samples one result may carry
UPSTREAM_MEMORY_PASSES = 10  # utils._test_memory's passes, one peak read after each
# A run whose reruns on other cards were all `inconclusive` is rerun once more by a later sweep,
# until it has this many such verdicts; then it stays inconclusive, its page saying so.
SETTLE_MAX = 3
# Runs whose own samples a rerun is compared with (KernelIndex's protocols).
CONTROLLED_FAMILIES = (
    "kernelindex/cuda-v1",
    "kernelindex/cpu-v1",
    "kernelindex/liger-peak-memory",
    MEMORY_FAMILY,
)


@dataclass(frozen=True)
class Judgement:
    """New figures of a run's workload judged against the run, under the run's own protocol."""

    basis: str  # "samples" (both sides' raw samples) or "upstream" (upstream's do_bench figure)
    new: stats.Side
    old: stats.Side
    deviation: float | None
    low: float | None
    high: float | None
    how: str
    verdict: str
    tolerance: float
    measured_by: RerunJob | None


def run_judgement(run: BenchmarkRun, *, samples: list, upstream: dict | None, figures: tuple) -> Judgement:
    """The verdict: an equivalence judgement on the relative difference of the two medians, its
    95% interval against ±RERUN_TOLERANCE (docs/protocol.md). A run is judged under its own
    protocol: a KernelIndex-protocol run by the new samples against its measure job's; any other
    run (the source's, or an older controlled protocol) by the new upstream do_bench figure
    (`figures`, median / p20 / p80 of the samples, without one). A controlled rerun and a
    contributor's result file are judged by this one function."""
    measured_by = run.measured_by_jobs.filter(kind=JobKind.MEASURE).order_by("pk").first()
    own_protocol = run.protocol.comparability_family in CONTROLLED_FAMILIES and measured_by is not None
    if own_protocol and len(measured_by.samples) >= 2 and len(samples) >= 2:
        new = stats.Side(samples=judged_samples(run.metric, samples, upstream))
        old = stats.Side(samples=judged_samples(run.metric, measured_by.samples, measured_by.upstream))
        basis = "samples"
    else:
        upstream = upstream or dict(zip(("median", "p20", "p80"), figures, strict=True))
        new, old, basis = (
            stats.Side(**upstream),
            stats.Side(median=run.median, p20=run.p20, p80=run.p80),
            "upstream",
        )
    point, low, high, how = difference_interval(new, old, metric=run.metric, spread_from=samples)
    tolerance = settings.RERUN_TOLERANCE
    return Judgement(
        basis, new, old, point, low, high, how, stats.verdict(low, high, tolerance), tolerance, measured_by
    )


def judged_samples(metric: str, samples: list, upstream: dict | None) -> list:
    """What a job's figures and verdicts rest on: its samples, and for peak memory upstream's
    peaks only (memory_peaks). The verdict, the run page, the API and the rank intervals all
    read a job's samples through this."""
    return memory_peaks(samples, upstream) if metric == Metric.MEMORY else samples


def memory_peaks(samples: list, upstream: dict | None) -> list:
    """The peaks upstream's `_test_memory` took its quantiles of: one read after each of its
    passes. Until 2026-12-02 the harness also kept the readings that code inside a pass took
    (torch.compile compiling in the first pass), which come before upstream's own; such a job's
    last UPSTREAM_MEMORY_PASSES readings are its peaks when their quantiles are the job's upstream
    figures, as they are for every shipped one. Otherwise the samples are taken as they are."""
    peaks = samples[-UPSTREAM_MEMORY_PASSES:]
    if len(samples) <= UPSTREAM_MEMORY_PASSES or not isinstance(upstream, dict):
        return samples
    figures = [upstream.get(key) for key in ("median", "p20", "p80")]
    if not all(isinstance(value, int | float) and math.isfinite(value) for value in [*figures, *peaks]):
        return samples
    same = all(
        math.isclose(mine, theirs, rel_tol=1e-6)
        for mine, theirs in zip(stats.quantiles(peaks), figures, strict=True)
    )
    return peaks if same else samples


def difference_interval(new: stats.Side, old: stats.Side, *, metric: str, spread_from=None):
    """stats.difference_interval for two figures of one metric, the one place that says how its
    samples are resampled: timed calls in batches of consecutive calls (stats.batch_medians), a
    memory benchmark's peaks, which are not a sequence of timed calls, one by one."""
    return stats.difference_interval(new, old, spread_from=spread_from, batched=metric == Metric.LATENCY)


def settle_reruns_left(verdicts: list[str]) -> int | None:
    """For a run's verdicts on other cards than the one that measured it: None unless there is one
    or more and every one is `inconclusive`; else how many more reruns a sweep sends to settle the
    run (none once it has had SETTLE_MAX). The sweep and the run's page both read this."""
    if not verdicts or set(verdicts) != {Verdict.INCONCLUSIVE}:
        return None
    return max(SETTLE_MAX - len(verdicts), 0)


def judgement_note(judged: Judgement, *, subject: str) -> str:
    compared = "KernelIndex-protocol samples" if judged.basis == "samples" else "upstream's do_bench figure"
    interval = (
        f"95% interval {judged.low:+.2%} to {judged.high:+.2%}" if judged.low is not None else "no interval"
    )
    why = {
        Verdict.AGREES: f"the whole interval lies within ±{judged.tolerance:.1%}",
        Verdict.DISAGREES: f"the whole interval lies outside ±{judged.tolerance:.1%}",
        Verdict.INCONCLUSIVE: f"the interval is not wholly inside or wholly outside ±{judged.tolerance:.1%}; "
        "another rerun may settle it",
    }[judged.verdict]
    return (
        f"Compared: {compared}. Difference of medians {_percent(judged.deviation)}, {interval} ({judged.how}). "
        f"{subject}: {judged.new.count}; recorded run: {judged.old.count}. {why[0].upper()}{why[1:]}."
    )


def _percent(value) -> str:
    return "unknown" if value is None else f"{value:+.2%}"
