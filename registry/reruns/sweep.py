"""The controlled sweep: measure every mappable workload of the source data on this host's GPUs
through the real pipeline (measure jobs on Celery workers, one per GPU), rerun each result on
another card, and export what finished as data that `load_bundled_data` loads.

A rerun on the card that measured cannot make a run `reproduced` (models.raises_level), so a host
with one card leaves the runs it measured for the next host with another card, and spends its
time on new measurements and on the reruns other cards left (`same_card=True` reruns here anyway).
Last, when nothing else is left, it reruns the runs whose every rerun on another card came out
`inconclusive`, since another rerun may settle them (at most judgement.SETTLE_MAX such verdicts a run).

`python manage.py controlled_sweep --out DIR` (docs/reruns.md). Resumable: the runs already in
this database or in DIR (loaded first) are not measured again, so a sweep cut short by its
deadline goes on where it stopped when started again with the same DIR.
"""

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Max, Min
from django.utils import timezone

from registry.models import BenchmarkRun, EvidenceLevel, Kernel, Workload
from registry.reruns import controlled
from registry.reruns.harness import KERNELS, local_gpus, protocol_for
from registry.reruns.harness.kernels import missed_upstream_warmup, upstream_warmup_for
from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.harness.upstream import harness_ready
from registry.reruns.judgement import settle_reruns_left
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.services import JobRefused, job_cancel, measure_request, rerun_request
from registry.reruns.services.worker import job_spec
from registry.reruns.sweep_timeouts import (
    OUT_OF_MEMORY,
    Timeout,
    out_of_memory,
    timed_out_targets,
    timeouts_read,
    timeouts_write,
)
from registry.services.imports import BUNDLED_LIGER_CSV, liger_import

FINISHED = (JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED)
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
FINISH_GRACE_S = 30  # after the deadline, how long running jobs may take to finish
# How often a sweep writes the kernels whose jobs finished since it last wrote: a sweep killed
# from outside (a scheduler's time limit) loses at most this much of its work, not all of it.
CHECKPOINT_S = 60
MAX_ATTEMPTS = 2  # a target measured, or a run rerun, that failed twice is reported, not tried again
# The sweep's own time limit for one harness run (its workers' JOB_HARNESS_TIMEOUT): the slowest
# jobs of the shipped sweeps, fused_moe's on a cold Triton cache (compiling and autotuning each
# shape), took 235 s; every other kernel's under 90 s. A job that hangs is killed at this limit
# and its card goes on with the next; it is reported, not tried again in the same sweep (the
# sweep on GPU-dc082f35, 2026-12-03, lost half its GPU time to one multi_token_attention job that never returned,
# under the site's 1,800 s limit).
JOB_TIMEOUT_S = 360
# A job started this long past its time limit with no result recorded (a recorder that keeps
# failing on it) is reported and given up, so it cannot hold a place in the window for the rest
# of the sweep.
STUCK_GRACE_S = 120
LOG_TAIL = 3000  # characters of a worker's log that the sweep shows when the worker exits
VISIBILITY_MARGIN_S = 240  # the task's hard limit is JOB_HARNESS_TIMEOUT + 180 s (tasks.py)


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
        measured_on = _measured_on(runs)
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


@dataclass
class Progress:
    measured: int = 0
    reruns: int = 0
    failed: list = field(default_factory=list)
    waiting: int = 0  # measured on this one-card host's card: left for a rerun on another card
    unexported: set = field(default_factory=set)  # kernels with jobs finished since the last write
    # Measure jobs past the time limit or out of memory, not yet written to the timeouts file.
    timeouts: list = field(default_factory=list)
    skipped: int = 0  # targets dropped after a job of this sweep ran past the limit or out of memory


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
    queues = deque(deque(items) for items in by_kernel.values())
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
            protocol__comparability_family__in=_current_families(gpu_slug),
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


def _current_families(gpu_slug: str) -> set[str]:
    device = "cpu" if gpu_slug == "cpu" else "cuda"
    return {
        protocol_for(device=device, metric=metric)["comparabilityFamily"] for metric in ("latency", "memory")
    }


def _without_upstream_warmup(runs: list[BenchmarkRun]) -> set[int]:
    """Of `runs`, those measured before the harness ran their script's own warm-up
    (harness.kernels.missed_upstream_warmup): measured with another autotuned config than
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


def progress(
    *,
    gpu_slug: str,
    kernels: list[str] | None = None,
    out: Path = controlled.BUNDLED_CONTROLLED_DIR,
    job_timeout_s: float = JOB_TIMEOUT_S,
) -> dict:
    """Where the sweep stands for `gpu_slug`, read from the registry alone (no GPU, no worker):
    its targets, those measured, the reruns it still owes (runs never rerun, such as those a
    one-card host left for another card; runs rerun so far only on the card that measured them;
    older-protocol runs without a verdict) and the jobs left, a measure job and its rerun for
    each target still to measure; targets a sweep would not try under `job_timeout_s`, since a job
    of theirs ran past it or out of memory (`out`'s timeouts file), are counted apart. Then how the
    measured targets stand: `reproduced`, and those left `inconclusive` after the most reruns a
    sweep sends to settle them (SETTLE_MAX). Per kernel too, in the order `targets` gives."""
    todo = targets(gpu_slug=gpu_slug, kernels=kernels)
    wanted = set(todo)
    by_target = {
        target: run for target, run in measured_targets(gpu_slug=gpu_slug).items() if target in wanted
    }
    measured = list(by_target.values())
    never_rerun = _never_rerun(measured)
    record = RerunRecord.read(measured)
    own_card_only = _same_card_runs(measured, record, elsewhere_than=set())
    unsettled = _unsettled(measured, record, elsewhere_than=set())
    # Runs with as many inconclusive verdicts on other cards as a sweep sends: no sweep reruns them.
    left_inconclusive = [
        run
        for run in measured
        if run.pk in record.measured_on and settle_reruns_left(record.elsewhere(run.pk)) == 0
    ]
    legacy = _legacy_runs(gpu_slug, kernels)
    per_kernel = {}
    for target in todo:
        per_kernel.setdefault(target.kernel, {"targets": 0, "measured": 0})["targets"] += 1
    for run in measured:
        per_kernel[run.kernel.slug]["measured"] += 1
    unmeasured = [target for target in todo if target not in by_target]
    skipped = timed_out_targets(unmeasured, timeouts_read(out, gpu_slug), job_timeout_s=job_timeout_s)
    to_measure = len(unmeasured) - len(skipped)
    owed = len(never_rerun) + len(own_card_only) + len(legacy) + len(unsettled)
    return {
        "gpu": gpu_slug,
        "targets": len(todo),
        "measured": len(measured),
        "to_measure": to_measure,
        "not_tried_after_a_timeout_or_out_of_memory": len(skipped),
        "reruns_owed": {
            "never_rerun": len(never_rerun),
            "rerun_only_on_the_measuring_card": len(own_card_only),
            "older_protocol_without_verdict": len(legacy),
            "inconclusive_on_another_card": len(unsettled),
        },
        "jobs_left": 2 * to_measure + owed,
        "reproduced": sum(run.evidence_level == EvidenceLevel.REPRODUCED for run in measured),
        "inconclusive_after_the_most_reruns": len(left_inconclusive),
        "kernels": per_kernel,
    }


def _time_limits(job_timeout_s: float) -> dict:
    """The fleet's settings for the sweep's limit: JOB_HARNESS_TIMEOUT, and a broker visibility
    timeout that outlasts it with the task's hard limit (+180 s), raised where the environment's
    is shorter, never lowered (the settings refuse to start a worker whose visibility timeout a
    job could outlast; a shorter one only brings a lost message back sooner)."""
    configured = os.environ.get("CELERY_VISIBILITY_TIMEOUT") or settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(
        "visibility_timeout", 0
    )
    visibility = max(int(float(configured or 0)), int(job_timeout_s) + VISIBILITY_MARGIN_S)
    return {"JOB_HARNESS_TIMEOUT": str(job_timeout_s), "CELERY_VISIBILITY_TIMEOUT": str(visibility)}


class Fleet:
    """One Celery worker per GPU (CUDA_VISIBLE_DEVICES), all consuming the model's queue, and
    one CPU worker on the default queue that records results."""

    def __init__(self, *, gpu_slug: str, gpus: int, log_dir: Path, job_timeout_s: float = JOB_TIMEOUT_S):
        self.processes, self.logs = [], []
        base = [sys.executable, "-m", "celery", "-A", "kernelindex", "worker", "--prefetch-multiplier", "1"]
        root = Path(settings.BASE_DIR)
        common = {**os.environ, **MULTICAST_OFF, **_time_limits(job_timeout_s)}
        for index in range(gpus):
            env = dict(common)
            if gpu_slug != "cpu":
                env["CUDA_VISIBLE_DEVICES"] = str(index)
            command = [*base, "-Q", f"gpu.{gpu_slug}", "-c", "1", "-n", f"gpu{index}@%h", "-l", "info"]
            self._start(command, env, root, log_dir / f"worker-gpu{index}.log")
        command = [
            *base,
            "-Q",
            settings.CELERY_TASK_DEFAULT_QUEUE,
            "-c",
            "2",
            "-n",
            "recorder@%h",
            "-l",
            "info",
        ]
        self._start(command, common, root, log_dir / "worker-recorder.log")

    def _start(self, command, env, root, log: Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        self.processes.append(
            subprocess.Popen(command, cwd=root, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        )
        self.logs.append(log)

    def exited(self) -> str:
        """'' while every worker runs; else which one exited, with the end of its log."""
        for process, log in zip(self.processes, self.logs, strict=True):
            code = process.poll()
            if code is not None:
                tail = log.read_text(errors="replace")[-LOG_TAIL:]
                return f"the worker logging to {log.name} exited with status {code}; its log ends:\n{tail}"
        return ""

    def stop(self, grace_s: float = 20) -> None:
        for process in self.processes:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()  # a job cut short is cancelled by the sweep and measured next time
                process.wait()


def sweep(
    *,
    gpu_slug: str,
    gpus: int,
    out: Path,
    deadline_s: float,
    kernels: list[str] | None = None,
    limit: int | None = None,
    reruns: bool = True,
    export: bool = True,
    resume: bool = True,
    same_card: bool = False,
    checkpoint_s: float = CHECKPOINT_S,
    job_timeout_s: float = JOB_TIMEOUT_S,
    log=print,
) -> dict:
    """Measure, rerun and export until done or `deadline_s` has passed; returns the figures.
    While it runs, every `checkpoint_s` it exports the kernels whose jobs finished since. A job
    past `job_timeout_s` is killed on its card and reported. Without the harness it raises
    `HarnessMissing` before it sends a job."""
    # Without the harness every job would fail at once, each target twice: refuse before any.
    harness_ready()
    began = time.monotonic()
    stop_at = began + deadline_s
    _registry_ready(out, log)
    todo = targets(gpu_slug=gpu_slug, kernels=kernels)
    if limit is not None:
        todo = todo[:limit]
    done = measured_targets(gpu_slug=gpu_slug) if resume else {}
    unmeasured = [t for t in todo if t not in done]
    # Targets a job of an earlier sweep ran past this time limit on, or out of memory: not tried here.
    recorded = timeouts_read(out, gpu_slug) if resume else []
    skipped = timed_out_targets(unmeasured, recorded, job_timeout_s=job_timeout_s)
    pending = deque(t for t in unmeasured if t not in skipped)
    wanted = set(todo)
    # This host's cards (none on a CPU: every run is rerun here).
    host_cards = {uuid for _, uuid in local_gpus()[:gpus] if uuid} if reruns else set()
    keep_for_another = set() if same_card or len(host_cards) != 1 else host_cards
    figures = Progress()
    measured = [run for t, run in done.items() if t in wanted]
    unrerun = _never_rerun(measured) if reruns else []
    to_rerun = deque(_rerun_here(unrerun, keep_for_another, figures))
    cross_card, to_settle = [], deque()
    # A host whose cards are not known (no UUID read) cannot tell another card from the same.
    if reruns and resume:
        to_rerun.extend(_legacy_runs(gpu_slug, kernels))
        if host_cards:
            record = RerunRecord.read(measured)
            cross_card = _same_card_runs(measured, record, elsewhere_than=host_cards)
            to_rerun.extend(cross_card)
            to_settle.extend(_unsettled(measured, record, elsewhere_than=host_cards))
    log(
        f"{len(todo)} targets: {len(done)} measured already, {len(pending)} to measure, {len(to_rerun)} to rerun "
        f"({len(cross_card)} of them rerun so far only on the card that measured them; {figures.waiting} "
        f"measured on this host's only card wait for another); {len(to_settle)} to rerun once more when nothing "
        f"else is left (every rerun on another card inconclusive); {len(skipped)} not tried: a job of theirs "
        f"ran past {job_timeout_s:.0f} s or out of memory before (timeouts-{gpu_slug}.tsv)"
    )
    fleet = Fleet(gpu_slug=gpu_slug, gpus=gpus, log_dir=out / "logs", job_timeout_s=job_timeout_s)
    stuck_after_s = job_timeout_s + STUCK_GRACE_S
    in_flight: dict[int, Target | None] = {}
    attempts: dict[Target, int] = defaultdict(int)
    window = 2 * gpus + 1  # messages ahead of the workers: enough to keep every card busy
    checkpointed = time.monotonic()
    try:
        while time.monotonic() < stop_at and (pending or to_rerun or to_settle or in_flight):
            gone = fleet.exited()
            if gone:  # a worker that cannot start (its settings refused, say) never will
                log(gone)
                figures.failed.append(gone.splitlines()[0])
                break
            _collect(in_flight, pending, to_rerun, attempts, figures, reruns, keep_for_another, stuck_after_s)
            if export and figures.unexported and time.monotonic() - checkpointed >= checkpoint_s:
                _checkpoint(out, gpu_slug, figures, log)
                checkpointed = time.monotonic()
            while len(in_flight) < window and (to_rerun or pending or to_settle):
                if to_rerun:  # a rerun first: its run is already measured
                    _send_rerun(to_rerun.popleft(), in_flight, log, gpus=gpus)
                elif pending:
                    _send_measure(pending.popleft(), gpu_slug, in_flight, attempts, log)
                else:  # nothing owed is left: another rerun may settle an inconclusive run
                    _send_rerun(to_settle.popleft(), in_flight, log, gpus=gpus)
            time.sleep(0.25)
        # Past the deadline: nothing new starts; what is running may finish within the grace.
        for job_id in list(in_flight):
            job_cancel(job=RerunJob.objects.get(pk=job_id))
        grace_end = time.monotonic() + FINISH_GRACE_S
        while (
            time.monotonic() < grace_end and RerunJob.objects.filter(pk__in=list(in_flight)).active().exists()
        ):
            time.sleep(0.5)
        _collect(in_flight, pending, to_rerun, attempts, figures, reruns, keep_for_another, stuck_after_s)
    finally:
        fleet.stop()
    elapsed = time.monotonic() - began
    log(
        f"stopped after {elapsed:.0f} s: {figures.measured} measured, {figures.reruns} reruns finished, "
        f"{figures.waiting} runs wait for a rerun on another card, {figures.skipped} not tried after a job of "
        "theirs ran past the time limit or out of memory"
    )
    if export:
        controlled.controlled_runs_export_dir(out=out, gpu_slug=gpu_slug)
        _timeouts_flush(out, gpu_slug, figures, log)
    return {
        "elapsed_s": elapsed,
        "measured": figures.measured,
        "reruns": figures.reruns,
        "failed": figures.failed,
        "left": len(pending) + len(to_rerun) + len(to_settle),
        "waiting_for_another_card": figures.waiting,
        "skipped_after_timeout_or_out_of_memory": len(skipped) + figures.skipped,
    }


def _checkpoint(out: Path, gpu_slug: str, figures: Progress, log) -> None:
    kernels = sorted(figures.unexported)
    figures.unexported.clear()
    written = controlled.controlled_runs_export_dir(out=out, gpu_slug=gpu_slug, kernels=kernels)
    log(f"checkpoint: wrote {', '.join(path.name for path in written)}")
    _timeouts_flush(out, gpu_slug, figures, log)


def _timeouts_flush(out: Path, gpu_slug: str, figures: Progress, log) -> None:
    if figures.timeouts:
        path = timeouts_write(out, gpu_slug, figures.timeouts)
        figures.timeouts.clear()
        log(f"recorded in {path.name}: targets whose job ran past the time limit or out of memory")


def _registry_ready(out: Path, log) -> None:
    if not BenchmarkRun.objects.exists():
        log(liger_import(path=BUNDLED_LIGER_CSV))
    if out.is_dir() and controlled.controlled_files(out):
        log(controlled.controlled_runs_load(path=out))


def _legacy_runs(gpu_slug: str, kernels) -> list[BenchmarkRun]:
    """Controlled runs of an older protocol whose reruns were judged without a verdict (a fixed
    tolerance): rerun once more, judged under their own protocol, so that their level rests on a
    verdict."""
    runs = BenchmarkRun.objects.filter(
        source__slug=controlled.CONTROLLED_SOURCE["slug"], environment__slug=gpu_slug
    ).exclude(protocol__comparability_family__in=_current_families(gpu_slug))
    if kernels:
        runs = runs.filter(kernel__slug__in=kernels)
    with_verdict = RerunJob.objects.filter(kind=JobKind.RERUN).exclude(verdict="").values("run_id")
    return list(runs.exclude(pk__in=with_verdict).exclude(rerun_jobs__state__in=["queued", "running"]))


def _rerun_here(
    runs: list[BenchmarkRun], keep_for_another: set[str], figures: Progress
) -> list[BenchmarkRun]:
    """Of `runs` (none rerun yet), those to rerun on this host: all, unless the card that measured
    one is in `keep_for_another` (this one-card host's card), where a rerun could not make it
    `reproduced`; those are counted in `figures.waiting`. In one query."""
    if not keep_for_another:
        return runs
    measured_on = _measured_on(runs)
    here = [run for run in runs if measured_on.get(run.pk) not in keep_for_another]
    figures.waiting += len(runs) - len(here)
    return here


def _measured_on(runs: list[BenchmarkRun]) -> dict[int, str]:
    """Run id -> UUID of the card its measure job ran on (runs whose card is unknown left out)."""
    return dict(
        RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=runs)
        .exclude(gpu_uuid="")
        .values_list("result_run_id", "gpu_uuid")
    )


def _same_card_runs(
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


def _unsettled(
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


def _never_rerun(runs: list[BenchmarkRun]) -> list[BenchmarkRun]:
    """Of `runs`, those with no rerun under way and none finished with a verdict (an older one
    judged by a fixed tolerance does not count), in one query."""
    reruns = RerunJob.objects.filter(kind=JobKind.RERUN)
    done = set((reruns.active() | reruns.exclude(verdict="")).values_list("run_id", flat=True))
    return [run for run in runs if run.pk not in done]


def _send_measure(target: Target, gpu_slug: str, in_flight, attempts, log) -> None:
    attempts[target] += 1
    try:
        request = measure_request(
            kernel=_kernel(target.kernel),
            providers=[target.provider],
            operation_modes=[target.operation_mode],
            metrics=[target.metric],
            gpu_slug=gpu_slug,
            workloads=[target.workload_id],
            reason="Controlled sweep",
        )
    except JobRefused as exc:
        log(f"refused {target}: {exc}")
        return
    for job in request.created:
        in_flight[job.pk] = target


def _send_rerun(run: BenchmarkRun, in_flight, log, *, gpus: int) -> None:
    try:
        # A fleet of one card reruns on the card that measured (the verdict says so); asking it
        # to avoid that card would only make its worker hand each rerun on five times first.
        job = rerun_request(
            run=run, reason="Controlled sweep: rerun of a controlled measurement", other_card=gpus > 1
        )
    except JobRefused as exc:
        log(f"rerun refused for run {run.pk}: {exc}")
        return
    in_flight[job.pk] = None


def _collect(
    in_flight,
    pending,
    to_rerun,
    attempts,
    figures: Progress,
    reruns: bool,
    keep_for_another=frozenset(),
    stuck_after_s: float = JOB_TIMEOUT_S + STUCK_GRACE_S,
) -> None:
    stuck = (
        RerunJob.objects.filter(pk__in=list(in_flight))
        .exclude(state__in=FINISHED)
        .filter(started_at__lt=timezone.now() - timedelta(seconds=stuck_after_s))
    )
    for job in stuck.select_related("kernel", "workload"):
        target = in_flight.pop(job.pk)
        figures.failed.append(
            f"job {job.pk} ({target or 'rerun'}): no result recorded {stuck_after_s:.0f} s after it started {job.error}"
        )
        if target is not None:
            timeout = Timeout.from_job(job, ran_s=(timezone.now() - job.started_at).total_seconds())
            _timeout_note(timeout, in_flight, pending, figures)
    # Those still in flight: a timeout above may have cancelled some.
    finished = RerunJob.objects.filter(pk__in=list(in_flight), state__in=FINISHED)
    for job in finished.select_related("run", "result_run", "kernel", "workload"):
        target = in_flight.pop(job.pk)
        figures.unexported.add(job.kernel.slug)
        if job.kind == JobKind.RERUN:
            _rerun_finished(job, to_rerun, attempts, figures)
        elif job.state == JobState.SUCCEEDED:
            figures.measured += 1
            if reruns and job.gpu_uuid in keep_for_another:
                figures.waiting += 1
            elif reruns:
                to_rerun.append(job.result_run)
        elif job.timed_out:
            figures.failed.append(f"{target}: {job.error[:300]}")
            _timeout_note(Timeout.from_job(job, ran_s=_ran_s(job)), in_flight, pending, figures)
        elif attempts[target] < MAX_ATTEMPTS:
            pending.append(target)
        else:
            figures.failed.append(f"{target}: {job.error[:300]}")
            if out_of_memory(job):  # on both attempts: the workload does not fit this GPU model
                _timeout_note(
                    Timeout.from_job(job, ran_s=_ran_s(job), cause=OUT_OF_MEMORY), in_flight, pending, figures
                )


def _timeout_note(timeout: Timeout, in_flight, pending, figures: Progress) -> None:
    """Keep `timeout` for the timeouts file, and spend no more of this sweep on what it covers
    (sweep_timeouts: the same kernel and provider, any pass, or its own pass for one out of
    memory, as far or further): those targets still to send are dropped, and their jobs sent but
    not yet claimed are cancelled. A job a worker has started is left to finish or reach the
    limit."""
    figures.timeouts.append(timeout)
    measures = [pk for pk, target in in_flight.items() if target is not None]
    queued = list(RerunJob.objects.filter(pk__in=measures, state=JobState.QUEUED).only("pk"))
    covered = timed_out_targets(
        [*pending, *(in_flight[job.pk] for job in queued)], [timeout], job_timeout_s=0
    )
    if not covered:
        return
    kept = [target for target in pending if target not in covered]
    figures.skipped += len(pending) - len(kept)
    pending.clear()
    pending.extend(kept)
    for job in queued:
        if in_flight[job.pk] in covered and job_cancel(job=job):
            in_flight.pop(job.pk)
            figures.skipped += 1


def _ran_s(job: RerunJob) -> float:
    if job.started_at and job.finished_at:
        return (job.finished_at - job.started_at).total_seconds()
    return 0.0


def _rerun_finished(job: RerunJob, to_rerun, attempts, figures: Progress) -> None:
    """A rerun with a verdict counts; a failed one (a compiler's error on a cold cache, say) is
    sent again once, then reported (one that ran past its time limit at once); one cancelled at
    the deadline is left for the next sweep."""
    if job.state in (JobState.SUCCEEDED, JobState.DIVERGED):
        figures.reruns += 1
    elif job.state == JobState.FAILED:
        attempts[("rerun", job.run_id)] += 1
        if attempts[("rerun", job.run_id)] < MAX_ATTEMPTS and not job.timed_out:
            to_rerun.append(job.run)
        else:
            figures.failed.append(f"rerun of run {job.run_id}: {job.error[:300]}")


def _kernel(slug: str) -> Kernel:
    return Kernel.objects.get(slug=slug)


def throughput(*, gpu_slug: str, gpus: int, count: int, out: Path, deadline_s: float, log=print) -> dict:
    """Jobs per hour on the same job list (the first `count` targets), with one worker and with
    `gpus` workers: from the first job's start to the last one's finish, so that starting the
    workers (imports, the first CUDA context) is not counted. Nothing is exported."""
    figures = {}
    for workers in (1, gpus):
        began = timezone.now()
        outcome = sweep(
            gpu_slug=gpu_slug,
            gpus=workers,
            out=out,
            deadline_s=deadline_s / 2,
            limit=count,
            reruns=False,
            export=False,
            resume=False,
            log=log,
        )
        jobs = RerunJob.objects.filter(created_at__gte=began, kind=JobKind.MEASURE, state=JobState.SUCCEEDED)
        first, last = _span(jobs)
        hours = (last - first).total_seconds() / 3600 if first and last else 0
        figures[workers] = {
            "jobs": jobs.count(),
            "seconds": hours * 3600,
            "jobs_per_hour": jobs.count() / hours if hours else 0,
            "left": outcome["left"],
        }
        log(f"{workers} worker(s): {figures[workers]}")
    if figures.get(1, {}).get("jobs_per_hour") and gpus > 1:
        figures["speedup"] = figures[gpus]["jobs_per_hour"] / figures[1]["jobs_per_hour"]
    return figures


def _span(jobs):
    span = jobs.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return span["first"], span["last"]
