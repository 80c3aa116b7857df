"""The interval of a job's median and of the difference of two medians, with variance components
(scipy, Student's t). No Django; of KernelIndex only the equivalence rule of medians.py: the verdict model, the figures script
and the recorder all use it.

Everything is on the log scale (a ratio of medians is a difference of logs), so that a relative
difference is symmetric and variance components add. A job's samples are consecutive calls that
move together in time, so the variance of its median is read between blocks: the medians of
BLOCKS consecutive blocks, their variance over the block count (batch means), with k − 1 degrees
of freedom. Between two processes (two jobs on one card, or two cards) a further component adds
that no within-job spread shows; it is fitted from reruns (verdict_model.fit_process_component)."""

import functools
import math
from dataclasses import dataclass

import numpy as np

from registry.stats.medians import (
    verdict as equivalence_verdict,  # noqa: F401 - the one rule, named for the model
)

CONFIDENCE = 0.95
BLOCKS = 10
# The spread of a job's stretch medians read robustly (the normal-consistent median absolute
# deviation) where it has at least this many stretches; its degrees of freedom are the sample
# variance's times the MAD's efficiency at the normal (about 37%).
ROBUST_MIN_STRETCHES, MAD_EFFICIENCY = 8, 0.37


@dataclass(frozen=True)
class MedianEstimate:
    """A job's median on the log scale: its value, the variance of that value, and the degrees of
    freedom that variance rests on."""

    log_median: float
    variance: float
    df: float
    blocks: int
    # Read between blocks the harness sampled independently (setup, allocator and warm-up again
    # each block), not between stretches of one process: the between-process spread is in them.
    independent: bool = False

    @property
    def median(self) -> float:
        return math.exp(self.log_median)


@dataclass(frozen=True)
class Difference:
    """(new − old) / old of two medians, with its interval, on the relative scale."""

    point: float
    low: float
    high: float
    standard_error: float  # of the log ratio
    df: float

    def shifted(self, by: float) -> "Difference":
        """The same difference for the new side's samples all scaled by (1 + by)."""
        scale = 1 + by
        return Difference(
            (1 + self.point) * scale - 1,
            (1 + self.low) * scale - 1,
            (1 + self.high) * scale - 1,
            self.standard_error,
            self.df,
        )


def block_medians(samples, blocks: int = BLOCKS) -> np.ndarray:
    """The medians of `blocks` consecutive, near-equal blocks of the samples in the order they
    were taken (fewer, of two samples each, when there are fewer than 2 × blocks samples)."""
    values = np.asarray(samples, dtype=float)
    count = min(blocks, values.size // 2)
    if count < 2:
        raise ValueError(f"{values.size} sample(s): at least 4 are needed for two blocks")
    # np.array_split's blocks: the first `longer` one sample longer than the rest; each side one
    # reshape, so each block's median is taken in one call rather than one call a block.
    size, longer = divmod(values.size, count)
    split = longer * (size + 1)
    medians = [np.median(values[:split].reshape(longer, size + 1), axis=1)] if longer else []
    medians.append(np.median(values[split:].reshape(count - longer, size), axis=1))
    return np.concatenate(medians)


def median_estimate(samples, blocks: int = BLOCKS, *, block_ids=None) -> MedianEstimate:
    """The job's median and the between-block variance of it (batch means on the log scale).
    `block_ids` (each sample's block, as the harness records them since it samples in
    independent blocks) gives the blocks themselves when there are two or more; their sample
    variance is the spread. Otherwise the samples are cut into `blocks` consecutive stretches of
    one process, and their spread is read robustly (stretch_spread): a stall or a burst of
    host-paced calls in one stretch moves that stretch's median far and the job's median hardly
    at all, and the sample variance of ten stretch medians would take the one for the other."""
    values = np.asarray(samples, dtype=float)
    if values.size < 4 or not np.all(values > 0) or not np.all(np.isfinite(values)):
        raise ValueError("a median estimate needs four or more positive, finite samples")
    groups = _recorded_blocks(values, block_ids)
    if groups:
        logs = np.log([np.median(group) for group in groups])
        variance, df = float(np.var(logs, ddof=1)), float(logs.size - 1)
    else:
        logs = np.log(block_medians(values, blocks))
        variance, df = stretch_spread(logs)
    return MedianEstimate(
        log_median=float(np.log(np.median(values))),
        variance=variance / logs.size,
        df=df,
        blocks=logs.size,
        independent=bool(groups),
    )


def stretch_spread(logs: np.ndarray) -> tuple[float, float]:
    """(variance, df) of one stretch median (log scale). With ROBUST_MIN_STRETCHES or more: the
    square of the normal-consistent median absolute deviation (scipy), on MAD_EFFICIENCY of the
    sample variance's df; the sample variance where that deviation is zero (more than half the
    stretch medians equal, as a coarse timer gives) or the stretches are fewer."""
    sample = (float(np.var(logs, ddof=1)), float(logs.size - 1))
    if logs.size < ROBUST_MIN_STRETCHES:
        return sample
    deviation = float(_median_abs_deviation()(logs, scale="normal"))
    if deviation <= 0:
        return sample
    return deviation**2, MAD_EFFICIENCY * (logs.size - 1)


@functools.cache
def _median_abs_deviation():
    """scipy's median_abs_deviation without its axis-and-NaN-policy wrapper (functools.wraps
    keeps the function it wraps as `__wrapped__`): the wrapper checks and reshapes its input,
    which cost over ten times the deviation itself on the ten stretch medians of a job (about
    1 ms a call against 0.09 ms, 2026-12-07), and judging the shipped reruns again on a load asks
    for it 3,264 times. The input here is one 1-D float array, on which the two agree, a NaN
    included (the wrapper's default propagates it, as the function does)."""
    from scipy import stats  # here, not with the module (registry/stats/medians.py says why)

    return getattr(stats.median_abs_deviation, "__wrapped__", stats.median_abs_deviation)


def _recorded_blocks(values: np.ndarray, block_ids) -> list[np.ndarray] | None:
    if not isinstance(block_ids, list | tuple) or len(block_ids) != values.size:
        return None
    ids = np.asarray(block_ids)
    groups = [values[ids == block] for block in dict.fromkeys(block_ids)]
    return groups if len(groups) >= 2 and all(group.size >= 1 for group in groups) else None


def satterthwaite_df(parts: list[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variance parts (variance, df); a part
    with infinite df (a component known from many reruns) adds no uncertainty of its own."""
    total = sum(variance for variance, _ in parts)
    denominator = sum(variance**2 / df for variance, df in parts if variance > 0 and math.isfinite(df))
    if total <= 0:
        return math.inf
    return total**2 / denominator if denominator > 0 else math.inf


def median_interval(
    estimate: MedianEstimate,
    *,
    process_variance: float = 0.0,
    process_df: float = math.inf,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The interval of the median another process would centre on: the between-block variance
    plus the between-process component, Student's t with Satterthwaite's df."""
    parts = [(estimate.variance, estimate.df), (process_variance, process_df)]
    half = _t(confidence, satterthwaite_df(parts)) * math.sqrt(sum(v for v, _ in parts))
    return math.exp(estimate.log_median - half), math.exp(estimate.log_median + half)


def difference(
    new: MedianEstimate,
    old: MedianEstimate,
    *,
    process_variance: float = 0.0,
    process_df: float = math.inf,
    confidence: float = CONFIDENCE,
) -> Difference:
    """The relative difference of two jobs' medians and its interval: each side's between-block
    variance, plus the between-process component once for each of the two processes."""
    parts = [(new.variance, new.df), (old.variance, old.df), (2 * process_variance, process_df)]
    log_ratio = new.log_median - old.log_median
    error = math.sqrt(sum(v for v, _ in parts))
    df = satterthwaite_df(parts)
    half = _t(confidence, df) * error
    return Difference(
        math.expm1(log_ratio), math.expm1(log_ratio - half), math.expm1(log_ratio + half), error, df
    )


def pooled_difference(
    old: MedianEstimate,
    others: list[MedianEstimate],
    *,
    process_variance: float = 0.0,
    process_df: float = math.inf,
    confidence: float = CONFIDENCE,
) -> Difference:
    """The run's median against the mean (log scale) of other cards' medians of the same
    workload: the others' variance shrinks by their count; the run's own side does not."""
    if not others:
        raise ValueError("a pooled reference needs at least one other median")
    count = len(others)
    mean = sum(other.log_median for other in others) / count
    others_variance = sum(o.variance + process_variance for o in others) / count**2
    parts = [(old.variance + process_variance, min(old.df, process_df)), (others_variance, max(count - 1, 1))]
    error = math.sqrt(sum(v for v, _ in parts))
    df = satterthwaite_df(parts)
    half = _t(confidence, df) * error
    log_ratio = mean - old.log_median
    return Difference(
        math.expm1(log_ratio), math.expm1(log_ratio - half), math.expm1(log_ratio + half), error, df
    )


def quantile_interval(
    values, *, q: float = 0.5, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """A quantile of `values` and its distribution-free interval (scipy's quantile_test, from
    order statistics); the ends are ±inf when there are too few values for that confidence."""
    from scipy import stats

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values")
    point = float(np.quantile(data, q))
    interval = stats.quantile_test(data, q=point, p=q).confidence_interval(confidence_level=confidence)
    return point, float(interval.low), float(interval.high)


@functools.lru_cache(maxsize=4096)
def _t(confidence: float, df: float) -> float:
    """The two-sided critical value; kept for each (confidence, df), which recur job after job
    (scipy's ppf costs about 0.2 ms a call)."""
    from scipy import stats

    tail = (1 + confidence) / 2
    return float(stats.norm.ppf(tail) if not math.isfinite(df) else stats.t.ppf(tail, df))
