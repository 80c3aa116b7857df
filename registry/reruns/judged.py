"""What a job's figures and verdicts rest on: its samples, and for peak memory upstream's peaks
only; and the 95% interval of the median of those, which the recorder and the loader store with
each job (RerunJob.judged_ci_low/high) for rank intervals to read. Pure functions over a job's
stored JSON: the model, the recorder, the pages and a migration all use them."""

import math

from registry.models import Metric
from registry.stats import medians

UPSTREAM_MEMORY_PASSES = 10  # utils._test_memory's passes, one peak read after each


def judged_samples(metric: str, samples: list, upstream: dict | None) -> list:
    """What a job's figures and verdicts rest on: its samples, and for peak memory upstream's
    peaks only (memory_peaks). The verdict, the run page, the API and the rank intervals all
    read a job's samples through this."""
    return memory_peaks(samples, upstream) if metric == Metric.MEMORY else samples


def judged_interval(metric: str, samples, upstream: dict | None) -> tuple[float | None, float | None]:
    """The 95% interval of the median of `judged_samples` (scipy's order-statistic interval, the
    one the sampling stops on); (None, None) where there is none. A worker's JSON is read
    defensively: what is not a finite number is left out."""
    raw = samples if isinstance(samples, list) else []
    values = [
        float(v) for v in raw if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]
    return medians.median_interval(judged_samples(metric, values, upstream)) or (None, None)


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
        for mine, theirs in zip(medians.quantiles(peaks), figures, strict=True)
    )
    return peaks if same else samples
