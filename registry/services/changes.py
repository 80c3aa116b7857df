"""Changes: steps between consecutive values of a series, judged with the uncertainty the data has.

- Source values carry p20/p50/p80 only, often from one call. A step counts when the relative
  difference of the medians is at least CHANGE_THRESHOLD and the p20-p80 ranges do not overlap;
  a single-call figure (p20 = p50 = p80) on either side makes a large step `uncertain`, never a
  regression: one call cannot order two values.
- Controlled values carry their raw samples (the measure job's): a step counts when a
  Mann-Whitney test gives p <= CHANGE_P_VALUE and the difference is at least CHANGE_THRESHOLD
  (asv's rule); a large step the test cannot confirm is `uncertain`.
- Peak memory (max_memory_allocated over 10 runs) has no spread: its equal quantiles are a
  deterministic figure, not one call, so a step over the threshold is called either way.
- A source that publishes a mean, its std and the number of calls (KernelBench) changes a figure
  by publishing a new value that supersedes the old one: each such step (the same workload, so
  the same comparison key) counts when Welch's t-test on the two published means (scipy's
  ttest_ind_from_stats) gives p <= CHANGE_P_VALUE and the difference is at least CHANGE_THRESHOLD;
  a large step the test cannot confirm, or one without a published spread, is `uncertain`.
Steps below the threshold, or whose ranges overlap, are noise and are not kept. Lower is better
for every metric the registry holds (latency, memory).

A change is a change of software. A step between two runs of one implementation (same provider
and version) on one environment whose software versions are recorded (a KernelIndex controlled
run captures driver, CUDA, torch, Triton, liger-kernel, transformers and Python) is KernelIndex
measuring the same software again: never a change, whatever the difference (`is_remeasurement`).
The run page shows both measurements; the later one is current (docs/reruns.md).
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet

from registry.cache import generation_bump
from registry.evidence import measured_samples
from registry.models import BenchmarkRun, Change, ChangeKind, Environment

SERIES_FIELDS = (
    "pk",
    "comparison_key",
    "provider",
    "kernel_id",
    "gpu_product",
    "operation_mode",
    "metric",
    "median",
    "p20",
    "p80",
    "observed_at",
    "origin_id",
    "implementation_id",
    "environment_id",
)


@dataclass(frozen=True)
class Judgement:
    kind: str
    ratio: float
    evidence: str
    p_value: float | None = None


def step_judge(before, after, *, samples_before=None, samples_after=None) -> Judgement | None:
    """The call on one step; None where it is noise. `before`/`after` have metric, median, p20, p80."""
    threshold = settings.CHANGE_THRESHOLD
    if before.median <= 0:
        return None
    ratio = after.median / before.median
    difference = abs(ratio - 1)
    direction = ChangeKind.REGRESSION if ratio > 1 else ChangeKind.IMPROVEMENT
    size = f"{(ratio - 1) * 100:+.1f}% (threshold ±{threshold * 100:g}%)"
    if difference < threshold:
        return None
    if samples_before and samples_after:
        from scipy.stats import mannwhitneyu  # here, not with the module (registry/stats/medians.py says why)

        p = float(mannwhitneyu(samples_before, samples_after, alternative="two-sided").pvalue)
        counts = f"{len(samples_before)} and {len(samples_after)} samples"
        return _tested(direction, ratio, size, f"Mann-Whitney p = {p:.2g} over {counts}", p)
    if before.metric == "memory":
        # Peak memory is the max over 10 runs and does not vary: equal quantiles are not one call.
        return Judgement(direction, ratio, f"{size}; peak memory over 10 runs each, no spread")
    single = [side for side, run in (("before", before), ("after", after)) if run.p20 == run.p80]
    if single:
        return Judgement(
            ChangeKind.UNCERTAIN,
            ratio,
            f"{size}, but the {' and '.join(single)} value{'s are' if len(single) == 2 else ' is'} "
            "a single call (p20 = p50 = p80): one call cannot order two values",
        )
    if before.p20 <= after.p80 and after.p20 <= before.p80:
        return None  # the p20-p80 ranges overlap: noise
    return Judgement(direction, ratio, f"{size}; the p20-p80 ranges do not overlap")


def mean_step_judge(before: dict, after: dict) -> Judgement | None:
    """The call on a step between two published means (`mean`, `std`, `num_trials` as the source
    names them); None where it is noise."""
    threshold = settings.CHANGE_THRESHOLD
    try:
        (m1, s1, n1), (m2, s2, n2) = (
            (float(side["mean"]), float(side["std"]), int(side["num_trials"])) for side in (before, after)
        )
    except (KeyError, TypeError, ValueError):
        return None
    if m1 <= 0:
        return None
    ratio = m2 / m1
    if abs(ratio - 1) < threshold:
        return None
    direction = ChangeKind.REGRESSION if ratio > 1 else ChangeKind.IMPROVEMENT
    size = f"{(ratio - 1) * 100:+.1f}% (threshold ±{threshold * 100:g}%)"
    if min(n1, n2) < 2 or not (s1 > 0 and s2 > 0):
        return Judgement(
            ChangeKind.UNCERTAIN, ratio, f"{size}, but a side publishes no spread (std or calls): no test"
        )
    from scipy.stats import ttest_ind_from_stats

    p = float(ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False).pvalue)
    return _tested(
        direction, ratio, size, f"Welch's t-test p = {p:.2g}, means over {n1} and {n2} calls, as published", p
    )


def _tested(direction: str, ratio: float, size: str, test: str, p: float) -> Judgement:
    """A step over the threshold with a test's p-value: a change when p <= CHANGE_P_VALUE, else
    uncertain; `test` says which test and over what."""
    if p <= settings.CHANGE_P_VALUE:
        return Judgement(direction, ratio, f"{size}; {test}", p)
    return Judgement(ChangeKind.UNCERTAIN, ratio, f"{size}, but {test} (> {settings.CHANGE_P_VALUE:g})", p)


@transaction.atomic
def changes_detect(*, runs: QuerySet | None = None) -> dict[str, int]:
    """(Re)judge every step of the series `runs` belong to (every series when None): a step
    that is no longer between consecutive values (a value placed between them later) is
    removed. Returns {"created": n, "removed": n}. A constant number of queries."""
    # A source that publishes a mean (KernelBench) has a series per host, which the series key
    # does not hold: its steps are the new values that superseded the old (_mean_steps).
    members = BenchmarkRun.objects.exclude(protocol__statistic="mean")
    if runs is not None:
        keys = set(runs.values_list("comparison_key", "provider"))
        if not keys:
            return {"created": 0, "removed": 0}
        # Subqueries, not lists: Django prepares every value of an `__in` list one by one, and
        # an import's thousands of keys and pks cost more to compile than the queries take.
        members = members.filter(comparison_key__in=runs.values("comparison_key"))
        # A step joins two values of one series: only series of two or more values are read (a
        # first import's are mostly one value each), counted by the database.
        members = members.filter(comparison_key__in=_series_of_several(members))
    series: dict[tuple, list] = {}
    for row in members.order_by("observed_at", "pk").values_list(*SERIES_FIELDS):
        run = _Value(*row)
        if runs is None or (run.comparison_key, run.provider) in keys:
            series.setdefault((run.comparison_key, run.provider), []).append(run)
    pks = [run.pk for values in series.values() for run in values]
    # Samples of every member the query found; the series' runs are looked up among them.
    samples = measured_samples(members.values("pk") if runs is not None else pks) if pks else {}
    recorded_software = set(Environment.objects.exclude(software={}).values_list("pk", flat=True))
    wanted = {}
    for values in series.values():
        for before, after in zip(values, values[1:], strict=False):
            if is_remeasurement(before, after, recorded_software=recorded_software):
                continue
            judgement = step_judge(
                before, after, samples_before=samples.get(before.pk), samples_after=samples.get(after.pk)
            )
            if judgement:
                wanted[(before.pk, after.pk)] = (after, judgement)
    mean_pks, mean_wanted = _mean_steps(runs)
    pks += mean_pks
    wanted.update(mean_wanted)
    existing = {
        (before, after): (pk, kind, attributed)
        for pk, before, after, kind, attributed in _changes_after(
            pks, members if runs is not None else None, mean_pks
        )
    }
    keep = {
        pair
        for pair, (_, kind, attributed) in existing.items()
        if pair in wanted and (kind, attributed) == (wanted[pair][1].kind, wanted[pair][0].origin_id)
    }
    removed = [pk for pair, (pk, _, _) in existing.items() if pair not in keep]
    Change.objects.filter(pk__in=removed).delete()
    created = Change.objects.bulk_create(
        [
            _change(pair[0], after, judgement)
            for pair, (after, judgement) in wanted.items()
            if pair not in keep
        ]
    )
    if created or removed:
        generation_bump()  # the changes page, its API and the feed are served from the page cache
    return {"created": len(created), "removed": len(removed)}


def _series_of_several(members: QuerySet) -> QuerySet:
    """The comparison keys among `members` with a series (key and provider) of two or more runs,
    as a subquery."""
    several = members.order_by().values("comparison_key", "provider").annotate(count=Count("pk"))
    return several.filter(count__gt=1).values("comparison_key")


def _changes_after(pks: list[int], members: QuerySet | None, mean_pks: list[int]) -> list[tuple]:
    """(pk, before, after, kind, attributed) of the changes stepping to one of `pks`. Given
    `members` (the query that found the series' runs), read through it as a subquery and kept to
    `pks` here, rather than sent as a list of thousands of values."""
    if not pks:
        return []
    fields = ("pk", "before_id", "after_id", "kind", "attributed_to_id")
    if members is None:
        return list(Change.objects.filter(after_id__in=pks).values_list(*fields))
    wanted = set(pks)
    found = Change.objects.filter(Q(after_id__in=members.values("pk")) | Q(after_id__in=mean_pks))
    return [row for row in found.values_list(*fields) if row[2] in wanted]


def _mean_steps(runs: QuerySet | None) -> tuple[list[int], dict]:
    """The steps of a source that publishes means: each run superseded by a new value of the same
    workload (a revised problem is another workload, not a change), judged on the published
    figures (mean_step_judge). Two queries. Returns the pks they touch and the steps wanted."""
    mean_runs = BenchmarkRun.objects.filter(protocol__statistic="mean")
    if runs is not None:
        mean_runs = mean_runs.filter(comparison_key__in=runs.values("comparison_key"))
    befores = {
        row[0]: row
        for row in mean_runs.filter(superseded_by__isnull=False).values_list(
            "pk", "superseded_by_id", "comparison_key", "source_metrics"
        )
    }
    if not befores:
        return [], {}
    afters = {
        row[0]: row
        for row in BenchmarkRun.objects.filter(pk__in={row[1] for row in befores.values()}).values_list(
            *SERIES_FIELDS, "source_metrics"
        )
    }
    wanted = {}
    for pk, after_pk, key, metrics in befores.values():
        row = afters.get(after_pk)
        if row is None:
            continue
        after = _Value(*row[:-1])
        if after.comparison_key != key:
            continue
        judgement = mean_step_judge(metrics or {}, row[-1] or {})
        if judgement:
            wanted[(pk, after.pk)] = (after, judgement)
    return [*befores, *afters], wanted


@dataclass(frozen=True)
class _Value:
    pk: int
    comparison_key: str
    provider: str
    kernel_id: int
    gpu_product: str
    operation_mode: str
    metric: str
    median: float
    p20: float
    p80: float
    observed_at: object
    origin_id: int | None
    implementation_id: int
    environment_id: int


def is_remeasurement(before, after, *, recorded_software: set[int]) -> bool:
    """The same implementation on the same environment, whose software versions are recorded
    (`recorded_software`: the environments that record them): nothing was changed but the time."""
    return (
        before.implementation_id == after.implementation_id
        and before.environment_id == after.environment_id
        and after.environment_id in recorded_software
    )


def _change(before_pk: int, after: _Value, judgement: Judgement) -> Change:
    return Change(
        kernel_id=after.kernel_id,
        before_id=before_pk,
        after_id=after.pk,
        kind=judgement.kind,
        ratio=judgement.ratio,
        p_value=judgement.p_value,
        evidence=judgement.evidence[:500],
        attributed_to_id=after.origin_id,
        observed_at=after.observed_at,
        gpu_product=after.gpu_product,
        provider=after.provider,
        operation_mode=after.operation_mode,
        metric=after.metric,
    )
