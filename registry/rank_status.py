"""What the data supports beside a run's rank (issue 14), read at page time, never stored.

The competition rank (registry/competition_ranks.py) orders medians, however little they rest on.
Beside it:
- each run has an interval: a source's p20–p80 range; for a controlled run the 95% interval of its
  median from its measure job's raw samples (medians.median_interval, with scipy);
  a source's peak memory (the maximum over 10 runs) is a point, exact; a latency figure with
  p20 = p50 = p80 is one timed call and has no interval;
- a run is compared with its group's best plausible run, and that run with the next plausible one
  (selectors.group_best_other, the compare link's choice: the #1 and its #2 unless the #1 is
  implausible, beyond its GPU's speed of light): one call on either side says "one sample: the
  order is not established"; overlapping intervals say "tied"; otherwise the gap between the
  medians, relative to the run compared with, and the interval of that gap from the two intervals
  (medians.ranges_difference). An implausible run is compared with nothing: a figure the hardware
  cannot produce orders no run, and no run is measured against it.
The compare page's ratio of two medians uses the rerun verdict's interval instead
(medians.difference_interval: a bootstrap over both runs' samples when both have them).
"""

import math
from dataclasses import dataclass

from django.db.models import F, TextChoices, Window
from django.db.models.functions import RowNumber

from registry.evidence import measured_intervals, measured_samples
from registry.models import CONTROLLED_SOURCE_SLUG, BenchmarkRun, Metric
from registry.reruns.judgement import difference_interval
from registry.selectors import group_best_other
from registry.stats import medians

ONE_SAMPLE = "one sample: the order is not established"
IMPLAUSIBLE = {
    Metric.LATENCY: "faster than its GPU's speed of light",
    Metric.MEMORY: "a peak below the memory its inputs occupy",
}
BETTER = {Metric.LATENCY: "faster", Metric.MEMORY: "smaller"}
WORSE = {Metric.LATENCY: "slower", Metric.MEMORY: "larger"}


class RankStatus(TextChoices):
    AHEAD = "ahead", "The best plausible run, ahead of the next plausible one beyond both intervals"
    BEHIND = "behind", "Behind the best plausible run beyond both intervals"
    TIED = "tied", "Tied with the best plausible run (that run: with the next one): the intervals overlap"
    ONE_SAMPLE = "one-sample", "One side is one timed call: the order is not established"
    ALONE = "alone", "Alone in its comparison group, or its only plausible run"
    IMPLAUSIBLE = "implausible", "Implausible (beyond its GPU's speed of light): not compared"
    UNRANKED = "unranked", "Not ranked (withdrawn or superseded)"


class IntervalBasis(TextChoices):
    P20_P80 = "p20-p80", "the p20–p80 range"
    MEDIAN_CI = "median-ci95", "the 95% interval of the median"
    NO_SPREAD = "no-spread", "peak memory, no spread"
    ONE_CALL = "one-call", "one timed call"
    MEAN_CI = "mean-t95", "the 95% t interval of the mean (from std and num_trials)"


@dataclass(frozen=True)
class Spread:
    """Where a run's median lies: (low, high), None for one timed call."""

    low: float | None
    high: float | None
    basis: str

    @property
    def single(self) -> bool:
        return self.low is None

    def overlaps(self, other: "Spread") -> bool:
        return self.low <= other.high and other.low <= self.high

    def words(self, unit: str) -> str:
        if self.single:
            return "one timed call (p20 = p50 = p80)"
        return f"{IntervalBasis(self.basis).label} {self.low:.4g}–{self.high:.4g} {unit}"


def spread_of(run: BenchmarkRun, median_interval: tuple[float, float] | None = None) -> Spread:
    """`median_interval`: a controlled run's 95% interval of the median, where it has one."""
    if median_interval is not None:
        return Spread(*median_interval, IntervalBasis.MEDIAN_CI)
    mean = mean_interval(run.source_metrics) if run.source_metrics else None
    if mean is not None:
        return Spread(*mean, IntervalBasis.MEAN_CI)
    if run.p20 != run.p80:
        return Spread(run.p20, run.p80, IntervalBasis.P20_P80)
    if run.metric == Metric.MEMORY:
        return Spread(run.median, run.median, IntervalBasis.NO_SPREAD)
    return Spread(None, None, IntervalBasis.ONE_CALL)


def mean_interval(metrics: dict, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Student's t interval of a published mean from its std and number of calls (a source
    that publishes a mean, not quantiles: KernelBench); None where the figures are not there."""
    try:
        mean, std, n = float(metrics["mean"]), float(metrics["std"]), int(metrics["num_trials"])
    except (KeyError, TypeError, ValueError):
        return None
    if n < 2:
        return None
    if std == 0:
        return mean, mean
    from scipy import stats  # here, not with the module (registry/stats/medians.py says why)

    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=std / math.sqrt(n))
    return float(low), float(high)


@dataclass(frozen=True)
class Standing:
    status: str
    spread: Spread
    metric: str
    compared: BenchmarkRun | None = None  # the best plausible run; for that run, the next one
    other: str = "#1"  # how the page names the run compared with
    best_plausible_rank: int | None = None  # set when it is not 1: the #1 is implausible
    only_plausible: bool = False  # ALONE, but with implausible runs beside it
    compared_spread: Spread | None = None
    difference: float | None = None  # (this − compared) / compared, of the medians
    low: float | None = None
    high: float | None = None

    @property
    def compared_id(self) -> int | None:
        return self.compared.pk if self.compared else None

    @property
    def summary(self) -> str:
        """One line for tables: "faster than #2 by 2.1% (1.4% to 2.9%)"."""
        if self.status == RankStatus.AHEAD:
            gap = f"{_pct(-self.difference)} ({_pct(-self.high)} to {_pct(-self.low)})"
            return f"{BETTER[self.metric]} than {self.other} by {gap}"
        if self.status == RankStatus.BEHIND:
            gap = f"{_pct(self.difference)} ({_pct(self.low)} to {_pct(self.high)})"
            return f"{WORSE[self.metric]} than {self.other} by {gap}"
        if self.status == RankStatus.TIED:
            return f"tied with {self.other}"
        if self.status == RankStatus.ONE_SAMPLE:
            return ONE_SAMPLE
        if self.status == RankStatus.IMPLAUSIBLE:
            return "implausible: not compared"
        if self.status == RankStatus.ALONE:
            return "the only plausible run in its group" if self.only_plausible else "alone in its group"
        return "not ranked"

    @property
    def statement(self) -> str:
        """The summary with what it rests on, for the run page."""
        if self.status == RankStatus.IMPLAUSIBLE:
            return (
                f"{self.summary} ({IMPLAUSIBLE[self.metric]}); its group's runs are compared with the "
                "best plausible one"
            )
        if self.status in (RankStatus.ALONE, RankStatus.UNRANKED):
            return self.summary
        if self.best_plausible_rank:
            return (
                f"{self._comparison()}; the #1 is implausible and not compared, "
                f"#{self.best_plausible_rank} is the best plausible run"
            )
        return self._comparison()

    def _comparison(self) -> str:
        unit = self.compared.unit
        if self.status == RankStatus.ONE_SAMPLE:
            return f"{self.summary}: {self._one_call_words()}"
        mine, theirs = self.spread.words(unit), self.compared_spread.words(unit)
        if self.status == RankStatus.TIED:
            if self.difference == 0:
                return f"{self.summary}: the same median"
            return f"{self.summary}: the intervals overlap (this run: {mine}; {self.other}: {theirs})"
        return (
            f"{self.summary}, the gap of the medians relative to {self.other}'s, with the interval "
            f"the two allow (this run: {mine}; {self.other}: {theirs})"
        )

    def _one_call_words(self) -> str:
        if self.spread.single and self.compared_spread.single:
            return f"the order between this run and {self.other} rests on one call each (p20 = p50 = p80)"
        who = "this run" if self.spread.single else self.other
        return f"{who} is one timed call (p20 = p50 = p80), which cannot order two runs"


def standing_of(run: BenchmarkRun, top: list[BenchmarkRun], intervals: dict) -> Standing:
    """Where `run` stands against `top`, its group's first two plausible runs in rank order (rank,
    median, pk, as the run page lists them; implausible runs in it are passed over); `intervals`:
    controlled runs' 95% intervals of the median."""
    return standing_against(run, group_best_other(top, run), intervals)


def standing_against(run: BenchmarkRun, compared: BenchmarkRun | None, intervals: dict) -> Standing:
    """Where `run` stands against `compared`, the run `selectors.group_best_other` chose for it
    (the run page chooses it once, for its compare link and for this)."""
    mine = spread_of(run, intervals.get(run.pk))
    if run.rank is None:
        return Standing(RankStatus.UNRANKED, mine, run.metric)
    if run.implausible:
        return Standing(RankStatus.IMPLAUSIBLE, mine, run.metric)
    if compared is None:
        only_plausible = (run.group_size or 1) > 1  # the others are all implausible
        return Standing(RankStatus.ALONE, mine, run.metric, only_plausible=only_plausible)
    theirs = spread_of(compared, intervals.get(compared.pk))
    difference = (run.median - compared.median) / compared.median if compared.median else 0.0
    best_rank = min(run.rank, compared.rank)  # the best plausible run's: the other one ranks after it
    common = {
        "spread": mine,
        "metric": run.metric,
        "compared": compared,
        "compared_spread": theirs,
        "other": f"another #{run.rank}" if compared.rank == run.rank else f"#{compared.rank}",
        "best_plausible_rank": best_rank if best_rank > 1 else None,
    }
    if run.rank == compared.rank:
        return Standing(RankStatus.TIED, difference=0.0, **common)
    if mine.single or theirs.single:
        return Standing(RankStatus.ONE_SAMPLE, difference=difference, **common)
    if mine.overlaps(theirs):
        return Standing(RankStatus.TIED, difference=difference, **common)
    low, high = medians.ranges_difference((mine.low, mine.high), (theirs.low, theirs.high), compared.median)
    status = RankStatus.AHEAD if run.rank < compared.rank else RankStatus.BEHIND
    return Standing(status, difference=difference, low=low, high=high, **common)


def attach(runs) -> list[BenchmarkRun]:
    """Set `run.standing` on each of `runs`, and return them as a list. Two queries at most,
    whatever their number: the first two plausible runs of each of their groups, and the 95%
    intervals of the controlled ones (none when no run involved is controlled). The run page
    sets its run's and its group's standings with `attach_group`."""
    runs = list(runs)
    tops = _group_tops({run.comparison_key for run in runs if run.rank is not None and not run.implausible})
    intervals = median_intervals([*runs, *(m for top in tops.values() for m in top)])
    for run in runs:
        run.standing = standing_of(run, tops.get(run.comparison_key, []), intervals)
    return runs


def attach_group(
    run: BenchmarkRun, members: list[BenchmarkRun], compared: BenchmarkRun | None, *, known: dict
) -> None:
    """The run page's standings: `run` against `compared`, and each of `members` (its whole
    comparison group, best first) against the group's first two plausible runs. `known`: the
    intervals the page has read already (its own measurement's); one query at most, for the
    other controlled members'."""
    plausible = [member for member in members if not member.implausible][:2]
    intervals = median_intervals([run, *members], known=known)
    run.standing = standing_against(run, compared, intervals)
    for member in members:
        member.standing = run.standing if member.pk == run.pk else standing_of(member, plausible, intervals)


def _group_tops(keys: set[str]) -> dict[str, list[BenchmarkRun]]:
    if not keys:
        return {}
    # The first two by rank need not be plausible, so number the plausible ones of each group.
    place = Window(RowNumber(), partition_by=F("comparison_key"), order_by=(F("rank"), F("median"), F("pk")))
    leaders = (
        BenchmarkRun.objects.current()
        .filter(comparison_key__in=keys, implausible=False)
        .annotate(place=place)
        .filter(place__lte=2)
        .select_related("source", "implementation")
        .order_by("comparison_key", "rank", "median", "pk")
    )
    tops: dict[str, list[BenchmarkRun]] = {}
    for run in leaders:
        tops.setdefault(run.comparison_key, []).append(run)
    return tops


def median_intervals(runs, *, known: dict | None = None) -> dict[int, tuple[float, float]]:
    """The 95% interval of the median of each controlled run among `runs`: its measure job's
    stored judged interval (RerunJob.judged_ci_low/high: scipy's order-statistic interval over
    the samples the verdict judges, stored when the result is recorded or loaded), not the job's
    `ci_low`/`ci_high`, which some early jobs computed otherwise and which stay as published.
    `known`: intervals by run already read, not read again; the rest in one query of two numbers
    a run."""
    pks = {run.pk for run in runs if is_controlled(run)}
    if not pks:
        return {}
    found = {pk: interval for pk, interval in (known or {}).items() if pk in pks and interval}
    if pks - set(found):
        found.update(measured_intervals(pks - set(found)))
    return found


def is_controlled(run: BenchmarkRun) -> bool:
    return run.source.slug == CONTROLLED_SOURCE_SLUG


# --- the compare page's ratio ----------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    """B / A of the medians, with its interval and what that interval rests on."""

    value: float | None
    low: float | None
    high: float | None
    how: str


def medians_ratio(a: BenchmarkRun, b: BenchmarkRun) -> Ratio:
    """The rerun verdict's interval (medians.difference_interval), as a ratio: a bootstrap over both
    runs' raw samples when both are controlled; else the two medians' ranges combined; none when
    a side is one timed call and no samples say how much one call varies. Peak memory from a
    source has no spread, so its ratio is exact. One query, for controlled runs' samples."""
    controlled = [run.pk for run in (a, b) if is_controlled(run)]
    samples = measured_samples(controlled) if controlled else {}
    new, old = (
        medians.Side(samples=samples.get(r.pk), median=r.median, p20=r.p20, p80=r.p80) for r in (b, a)
    )
    point, low, high, how = difference_interval(new, old, metric=a.metric)
    if point is None:
        return Ratio(None, None, None, how)
    if low is None and a.metric == b.metric == Metric.MEMORY and new.single_call and old.single_call:
        return Ratio(
            1 + point, 1 + point, 1 + point, "exact: peak memory has no spread (the maximum over 10 runs)"
        )
    if low is None:
        return Ratio(1 + point, None, None, how)
    return Ratio(1 + point, 1 + low, 1 + high, how)


def _pct(fraction: float) -> str:
    value = fraction * 100
    return f"{value:.1f}%" if abs(value) >= 1 else f"{value:.2f}%"


def compare_in_words(a: BenchmarkRun, b: BenchmarkRun, ratio: Ratio | None, comparable: bool) -> str:
    """The compare page's verdict, words first: "B (liger) is 2.0% faster than A (huggingface)",
    with what the interval of the ratio B / A allows; nothing ranked across comparison groups."""
    if not comparable:
        return "These runs are not in one comparison group, so neither is said to be faster."
    if not a.median or not b.median or ratio is None or ratio.value is None:
        return "No ratio: one of the medians is missing or zero."
    name_a = f"A ({a.implementation.provider})"
    name_b = f"B ({b.implementation.provider})"
    if ratio.value == 1:
        return f"{name_a} and {name_b} have the same median."
    memory = a.metric == Metric.MEMORY
    better, worse = (name_b, name_a) if ratio.value < 1 else (name_a, name_b)
    # How much less the better one takes, relative to the worse one.
    gap = 1 - min(ratio.value, 1 / ratio.value)
    amount = _pct(gap)
    sentence = (
        f"{better} uses {amount} less memory than {worse}"
        if memory
        else f"{better} is {amount} faster than {worse}"
    )
    if ratio.low is None:
        return f"{sentence}, but one side rests on one timed call, so the order is not established."
    if ratio.low <= 1 <= ratio.high:
        return f"{sentence}, but the interval of the ratio includes no difference, so the order is not established."
    return f"{sentence} (ratio B / A {ratio.value:.3f}, interval {ratio.low:.3f} to {ratio.high:.3f})."
