"""The statistics of controlled runs, with scipy: the distribution-free interval of a median, the
precision a sampling loop stops on, and the interval of the relative difference of two medians
that a rerun's verdict is read from.

Needs numpy and scipy and nothing of KernelIndex or Django: the harness's child process loads
this file by path for its stopping rule, and the recorder imports it for verdicts. scipy.stats is
imported where a statistic is computed, not with the module: its import costs about half a second
of CPU, which every Django process (each web and Celery worker, each manage.py command) would
otherwise pay at start, most of them never computing one.
"""

import functools
import math

import numpy as np

VERDICT_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261130  # a verdict is reproducible: the same samples give the same interval
# A job's samples are consecutive calls, and consecutive calls are not independent: a third of the
# shipped H200 jobs have a lag-1 autocorrelation above 0.3, and ops at the power cap drift
# through the whole job (docs/protocol.md). A bootstrap over single samples would then give an
# interval far too narrow; it resamples the medians of consecutive batches instead.
BATCHES = 10


def median_interval(samples, confidence: float = 0.95) -> tuple[float, float] | None:
    """The distribution-free interval of the median from order statistics (a binomial quantile
    test); None when there are too few samples for any finite interval at that confidence."""
    values = np.asarray(samples, dtype=float)
    if values.size < 2:
        return None
    low_rank, high_rank = median_interval_ranks(values.size, confidence)
    if low_rank is None or high_rank is None:
        return None
    ordered = np.sort(values)
    low, high = float(ordered[low_rank]), float(ordered[high_rank])
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low, high


@functools.lru_cache(maxsize=4096)
def median_interval_ranks(count: int, confidence: float) -> tuple[int | None, int | None]:
    """Which order statistics (0-based, in `count` sorted samples) bound the median's interval,
    None for an end past the samples: scipy's quantile_test reads them from the binomial
    distribution of `count` trials, so they depend on nothing else. Asked of `range(count)`, its
    interval is those ranks. Setting up scipy's distributions cost more than the rest of the
    interval, and a load of the shipped runs asks for thousands of intervals of a few sizes."""
    from scipy import stats  # here, not with the module (the module's docstring says why)

    interval = stats.quantile_test(np.arange(count, dtype=float), q=0, p=0.5).confidence_interval(
        confidence_level=confidence
    )
    return tuple(int(end) if math.isfinite(end) else None for end in (interval.low, interval.high))


def relative_precision(samples, confidence: float = 0.99) -> float:
    """Half the width of the median's interval, relative to the median, on its wider side (inf
    while there is no finite interval)."""
    interval = median_interval(samples, confidence)
    median = float(np.median(samples)) if len(samples) else 0.0
    if interval is None or median <= 0:
        return math.inf
    return max(median - interval[0], interval[1] - median) / median


def quantiles(samples) -> tuple[float, float, float]:
    """Median, 20th and 80th percentile (the source's QUANTILES, in its order)."""
    p50, p20, p80 = np.quantile(np.asarray(samples, dtype=float), [0.5, 0.2, 0.8])
    return float(p50), float(p20), float(p80)


class Side:
    """One side of a comparison: raw samples, or only a summary (median, p20, p80) as a source
    publishes it. A summary with p20 = p80 is one timed call: one sample."""

    def __init__(self, *, samples=None, median=None, p20=None, p80=None):
        self.samples = np.asarray(samples if samples is not None else [], dtype=float)
        if self.samples.size >= 2:
            self.median = float(np.median(self.samples))
        else:
            self.median = float(median if median is not None else self.samples[0])
        self.p20 = float(p20 if p20 is not None else self.median)
        self.p80 = float(p80 if p80 is not None else self.median)

    @property
    def has_samples(self) -> bool:
        return self.samples.size >= 2

    @property
    def single_call(self) -> bool:
        return not self.has_samples and self.p20 == self.p80

    @property
    def count(self) -> str:
        if self.has_samples:
            return f"{self.samples.size} samples"
        return (
            "1 sample (one timed call)"
            if self.single_call
            else "its published p20–p80 range only (its source published no samples)"
        )


def difference_interval(
    new: Side, old: Side, confidence: float = VERDICT_CONFIDENCE, *, spread_from=None, batched: bool = True
):
    """(point, low, high, how): the relative difference (new − old) / old of the medians, and its
    interval.

    Both sides with raw samples: a percentile bootstrap (scipy.stats.bootstrap) over the medians of
    each side's BATCHES consecutive batches (`batch_medians`), so that samples that move together
    in time count as one piece of evidence, not many. `batched=False` for samples that are not a
    sequence of timed calls (a memory benchmark's peaks: the same allocations each time, all but
    the first alike, which batches of two would only blur): the bootstrap is then over the samples.
    Otherwise the two medians' intervals are combined as ranges: a side with samples gives the
    order-statistic interval of its median; a published summary gives its p20–p80 range; one
    timed call is one draw, whose range is the spread of single calls seen on the other side, or
    in `spread_from` (samples of the same work under another loop), as the samples' central
    `confidence` range around their median. With one call and no samples to say how much one call
    varies there is no interval: (point, None, None, why)."""
    if not old.median > 0:
        return None, None, None, "the recorded median is not positive: no relative difference"
    point = float((new.median - old.median) / old.median)
    if new.has_samples and old.has_samples:
        if batched:
            new_batches, old_batches = batch_medians(new.samples), batch_medians(old.samples)
        else:
            new_batches, old_batches = new.samples, old.samples
        from scipy import stats

        result = stats.bootstrap(
            (new_batches, old_batches),
            _relative_difference_of_medians,
            n_resamples=BOOTSTRAP_RESAMPLES,
            vectorized=True,
            paired=False,
            method="percentile",
            confidence_level=confidence,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        how = (
            f"bootstrap over the medians of {new_batches.size} and {old_batches.size} consecutive batches of "
            f"the two sides' samples ({BOOTSTRAP_RESAMPLES} resamples)"
            if batched
            else f"bootstrap over both sides' samples ({BOOTSTRAP_RESAMPLES} resamples)"
        )
        return point, low, high, how
    extra = Side(samples=spread_from) if spread_from is not None and len(spread_from) >= 2 else None
    spread = _single_call_spread(new, old, *([extra] if extra else []), confidence=confidence)
    new_range, old_range = _range(new, spread, confidence), _range(old, spread, confidence)
    if new_range is None or old_range is None:
        return point, None, None, "one timed call on a side and no samples to say how much one call varies"
    low, high = ranges_difference(new_range, old_range, old.median)
    return point, low, high, "the two medians' ranges combined (a side without raw samples)"


def batch_medians(samples) -> np.ndarray:
    """The medians of BATCHES consecutive, near-equal batches of `samples` in the order they were
    taken (fewer batches, of two samples each, when there are fewer than 2 × BATCHES samples);
    two samples or three give themselves, there being no two batches to form."""
    values = np.asarray(samples, dtype=float)
    count = min(BATCHES, values.size // 2)
    if count < 2:
        return values
    return np.array([np.median(batch) for batch in np.array_split(values, count)])


def ranges_difference(new_range, old_range, old_median: float) -> tuple[float, float]:
    """The interval of (new − old) / old when each median is only known to lie in its range:
    from the smallest to the largest difference the two ranges allow."""
    return (
        float((new_range[0] - old_range[1]) / old_median),
        float((new_range[1] - old_range[0]) / old_median),
    )


def verdict(low, high, tolerance: float, beyond: float | None = None) -> str:
    """agrees: the whole interval inside ±tolerance; disagrees: wholly outside ±`beyond` (the
    tolerance itself unless a wider bound is given); else inconclusive (also when an end is
    missing or not finite). The one statement of the equivalence rule: the verdict model
    (registry/stats/verdict_model.py) judges with it too, with `beyond` the upper end of its
    margin's interval."""
    beyond = tolerance if beyond is None else max(beyond, tolerance)
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    if -tolerance <= low and high <= tolerance:
        return "agrees"
    if high < -beyond or low > beyond:
        return "disagrees"
    return "inconclusive"


def _relative_difference_of_medians(new, old, axis=-1):
    old_median = np.median(old, axis=axis)
    return (np.median(new, axis=axis) - old_median) / old_median


def _single_call_spread(*sides: Side, confidence: float):
    """Where one call may fall, relative to the median: from the first side with samples."""
    for side in sides:
        if side.has_samples:
            tail = (1 - confidence) / 2
            low, high = np.quantile(side.samples, [tail, 1 - tail])
            return float(low) / side.median - 1, float(high) / side.median - 1
    return None


def _range(side: Side, spread, confidence: float):
    if side.has_samples:
        return median_interval(side.samples, confidence) or (
            float(side.samples.min()),
            float(side.samples.max()),
        )
    if not side.single_call:
        return side.p20, side.p80
    if spread is None:
        return None
    return side.median * (1 + spread[0]), side.median * (1 + spread[1])
