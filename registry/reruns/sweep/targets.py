"""What a sweep works on, read from the registry: the targets to measure (every distinct workload,
provider, pass and metric of the source runs that the harness accepts), the controlled runs that
already measure them, and which of those runs are owed a rerun (never rerun, rerun only on the card
that measured them, judged under an older protocol without a verdict, or inconclusive on every
other card so far)."""

from collections import defaultdict, deque
from dataclasses import dataclass

from registry.models import BenchmarkRun, Kernel, Workload
from registry.reruns import controlled
from registry.reruns.harness import KERNELS, missed_upstream_warmup, protocol_for, upstream_warmup_for
from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.judgement import settle_reruns_left
from registry.reruns.models import JobKind, RerunJob
from registry.reruns.services.worker import job_spec


@dataclass(frozen=True)
class Target:
    kernel: str
    workload_id: int
    provider: str
    operation_mode: str
    metric: str


@dataclass
class RerunRecord:
    """What a sweep plans its reruns from, read once for a list of runs (three queries): the card
    each run was measured on (runs whose card is unknown left out), the runs with a rerun under
    way, and each run's judged reruns as (card, verdict), those on an unknown card left out."""

    measured_on: dict[int, str]
    busy: set[int]
    judged: dict[int, list[tuple[str, str]]]

    @classmethod
    def read(cls, runs: list[BenchmarkRun]) -> "RerunRecord":
        measured_on = measured_cards(runs)
        reruns = RerunJob.objects.filter(kind=JobKind.RERUN, run__in=list(measured_on))
        judged = defaultdict(list)
        for run_id, card, verdict in (
            reruns.exclude(verdict="").exclude(gpu_uuid="").values_list("run_id", "gpu_uuid", "verdict")
        ):
            judged[run_id].append((card, verdict))
        return cls(measured_on, set(reruns.active().values_list("run_id", flat=True)), judged)

    def elsewhere(self, run_id: int) -> list[str]:
        """The verdicts of a run's reruns on cards other than the one that measured it."""
        return [verdict for card, verdict in self.judged[run_id] if card != self.measured_on[run_id]]


def targets(*, gpu_slug: str, kernels: list[str] | None = None) -> list[Target]:
    """Every distinct (workload, provider, pass, metric) of the current source runs of the
    mappable kernels that the harness accepts, interleaved kernel by kernel so that a sweep cut
    short still covers every kernel."""
    runs = (
        BenchmarkRun.objects.current()
        .exclude(source__slug=controlled.CONTROLLED_SOURCE["slug"])
        .filter(kernel__slug__in=kernels or list(KERNELS))
        .values_list("kernel__slug", "workload_id", "implementation__provider", "operation_mode", "metric")
        .distinct()
        .order_by("kernel__slug", "workload_id", "implementation__provider", "operation_mode", "metric")
    )
    rows = [Target(*row) for row in runs]
    workloads = Workload.objects.in_bulk({t.workload_id for t in rows})
    kernel_rows = {k.slug: k for k in Kernel.objects.filter(slug__in={t.kernel for t in rows})}
    by_kernel = defaultdict(list)
    for target in rows:
        if gpu_slug == "cpu" and target.metric == "memory":
            continue
        job = RerunJob(
            kernel=kernel_rows[target.kernel],
            workload=workloads[target.workload_id],
            provider=target.provider,
            operation_mode=target.operation_mode,
            metric=target.metric,
            gpu_slug=gpu_slug,
        )
        try:
            plan_for(job_spec(job))
        except Refused:
            continue
        by_kernel[target.kernel].append(target)
    return _interleaved(by_kernel.values())


def _interleaved(groups) -> list:
    """One of each group in turn, until every group is spent."""
    queues = deque(deque(items) for items in groups)
    ordered = []
    while queues:
        queue = queues.popleft()
        ordered.append(queue.popleft())
        if queue:
            queues.append(queue)
    return ordered


def measured_targets(*, gpu_slug: str) -> dict[Target, BenchmarkRun]:
    """The controlled runs of this GPU model under the current protocol, by target; a run measured
    before the harness ran its script's own warm-up (`_without_upstream_warmup`) is history, and
    its target is measured again."""
    runs = list(
        BenchmarkRun.objects.filter(
            source__slug=controlled.CONTROLLED_SOURCE["slug"],
            environment__slug=gpu_slug,
            protocol__comparability_family__in=current_families(gpu_slug),
        ).select_related("kernel", "implementation")
    )
    stale = _without_upstream_warmup(runs)
    return {
        Target(
            run.kernel.slug, run.workload_id, run.implementation.provider, run.operation_mode, run.metric
        ): run
        for run in runs
        if run.pk not in stale
    }


def current_families(gpu_slug: str) -> set[str]:
    device = "cpu" if gpu_slug == "cpu" else "cuda"
    return {
        protocol_for(device=device, metric=metric)["comparabilityFamily"] for metric in ("latency", "memory")
    }


def _without_upstream_warmup(runs: list[BenchmarkRun]) -> set[int]:
    """Of `runs`, those measured before the harness ran their script's own warm-up
    (harness.missed_upstream_warmup): measured with another autotuned config than
    upstream's, so neither judged against nor rerun by the sweep. In one query, none when no run
    needs a warm-up."""
    needing = [run for run in runs if upstream_warmup_for(run.kernel.slug, run.implementation.provider)]
    if not needing:
        return set()
    sampling = dict(
        RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=needing).values_list(
            "result_run_id", "sampling"
        )
    )
    return {
        run.pk
        for run in needing
        if missed_upstream_warmup(run.kernel.slug, run.implementation.provider, sampling.get(run.pk))
    }


def legacy_runs(gpu_slug: str, kernels) -> list[BenchmarkRun]:
    """Controlled runs of an older protocol whose reruns were judged without a verdict (a fixed
    tolerance): rerun once more, judged under their own protocol, so that their level rests on a
    verdict."""
    runs = BenchmarkRun.objects.filter(
        source__slug=controlled.CONTROLLED_SOURCE["slug"], environment__slug=gpu_slug
    ).exclude(protocol__comparability_family__in=current_families(gpu_slug))
    if kernels:
        runs = runs.filter(kernel__slug__in=kernels)
    with_verdict = RerunJob.objects.filter(kind=JobKind.RERUN).exclude(verdict="").values("run_id")
    return list(runs.exclude(pk__in=with_verdict).exclude(rerun_jobs__state__in=["queued", "running"]))


def measured_cards(runs: list[BenchmarkRun]) -> dict[int, str]:
    """Run id -> UUID of the card its measure job ran on (runs whose card is unknown left out)."""
    return dict(
        RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=runs)
        .exclude(gpu_uuid="")
        .values_list("result_run_id", "gpu_uuid")
    )


def same_card_runs(
    runs: list[BenchmarkRun], record: RerunRecord, *, elsewhere_than: set[str]
) -> list[BenchmarkRun]:
    """Of `runs`, those whose every judged rerun ran on the card that measured them (a one-GPU
    host reruns there), measured on a card that is not one of `elsewhere_than` (this host's
    cards), with no rerun under way: rerun once more here, so that their verdict rests on two
    physical GPUs. A card that is not known (a CPU, a job without a UUID) counts as neither."""
    return [
        run
        for run in _rerunnable_here(runs, record, elsewhere_than)
        if record.judged[run.pk] and not record.elsewhere(run.pk)
    ]


def unsettled(
    runs: list[BenchmarkRun], record: RerunRecord, *, elsewhere_than: set[str]
) -> list[BenchmarkRun]:
    """Of `runs`, those whose every verdict on another card than the measuring one is
    `inconclusive` (at least one, fewer than SETTLE_MAX), measured on a card that is not one of
    `elsewhere_than` (this host's cards), with no rerun under way: another rerun here may settle
    them (docs/reruns.md)."""
    return [
        run
        for run in _rerunnable_here(runs, record, elsewhere_than)
        if settle_reruns_left(record.elsewhere(run.pk))
    ]


def _rerunnable_here(runs, record: RerunRecord, elsewhere_than: set[str]) -> list[BenchmarkRun]:
    """Of `runs`, those measured on a known card that is not one of this host's, with no rerun
    under way."""
    return [
        run
        for run in runs
        if run.pk in record.measured_on
        and record.measured_on[run.pk] not in elsewhere_than
        and run.pk not in record.busy
    ]


def never_rerun(runs: list[BenchmarkRun]) -> list[BenchmarkRun]:
    """Of `runs`, those with no rerun under way and none finished with a verdict (an older one
    judged by a fixed tolerance does not count), in one query."""
    reruns = RerunJob.objects.filter(kind=JobKind.RERUN)
    done = set((reruns.active() | reruns.exclude(verdict="")).values_list("run_id", flat=True))
    return [run for run in runs if run.pk not in done]
