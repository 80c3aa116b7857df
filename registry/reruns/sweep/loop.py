"""The sweep's loop: plan the work from the registry, start the fleet, send measure jobs and reruns
as the workers free up (owed reruns first, then new measurements, then reruns that may settle an
inconclusive run), collect what finished, write checkpoints, and at the deadline cancel what is
queued, give running jobs FINISH_GRACE_S and export."""

import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

from django.utils import timezone

from registry.models import BenchmarkRun, Kernel
from registry.reruns import controlled
from registry.reruns.harness import local_gpus
from registry.reruns.harness.upstream import harness_ready
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.services import JobRefused, job_cancel, measure_request, rerun_request
from registry.reruns.sweep.targets import (
    RerunRecord,
    Target,
    legacy_runs,
    measured_cards,
    measured_targets,
    never_rerun,
    same_card_runs,
    targets,
    unsettled,
)
from registry.reruns.sweep.timeouts import (
    OUT_OF_MEMORY,
    Timeout,
    out_of_memory,
    timed_out_targets,
    timeouts_read,
    timeouts_write,
)
from registry.reruns.sweep.workers import JOB_TIMEOUT_S, Fleet
from registry.sources import rerun_plugin

FINISHED = (JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED)
FINISH_GRACE_S = 30  # after the deadline, how long running jobs may take to finish
# How often a sweep writes the kernels whose jobs finished since it last wrote: a sweep killed
# from outside (a scheduler's time limit) loses at most this much of its work, not all of it.
CHECKPOINT_S = 60
MAX_ATTEMPTS = 2  # a target measured, or a run rerun, that failed twice is reported, not tried again
# A job started this long past its time limit with no result recorded (a recorder that keeps
# failing on it) is reported and given up, so it cannot hold a place in the window for the rest
# of the sweep.
STUCK_GRACE_S = 120


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


@dataclass
class Work:
    """What a sweep sets out to do, planned at its start (`_plan`), and what it has under way: the
    targets to measure (`pending`), the runs owed a rerun (`to_rerun`, sent first: their run is
    measured already), the runs to rerun once more when nothing else is left (`to_settle`: every
    rerun on another card inconclusive), the jobs in flight (a measure job's target; None for a
    rerun) and the attempts spent on each target or run."""

    targets: int
    measured_already: int
    skipped: int  # targets a job of an earlier sweep ran past this time limit on, or out of memory
    keep_for_another: set[str]  # this one-card host's card: the runs it measures wait for another
    pending: deque = field(default_factory=deque)
    to_rerun: deque = field(default_factory=deque)
    to_settle: deque = field(default_factory=deque)
    cross_card: int = 0  # of to_rerun: runs rerun so far only on the card that measured them
    in_flight: dict[int, Target | None] = field(default_factory=dict)
    attempts: dict = field(default_factory=lambda: defaultdict(int))

    def to_send(self) -> bool:
        return bool(self.to_rerun or self.pending or self.to_settle)

    def left(self) -> int:
        return len(self.pending) + len(self.to_rerun) + len(self.to_settle)

    def summary(self, *, waiting: int, gpu_slug: str, job_timeout_s: float) -> str:
        return (
            f"{self.targets} targets: {self.measured_already} measured already, {len(self.pending)} to measure, "
            f"{len(self.to_rerun)} to rerun ({self.cross_card} of them rerun so far only on the card that "
            f"measured them; {waiting} measured on this host's only card wait for another); "
            f"{len(self.to_settle)} to rerun once more when nothing else is left (every rerun on another card "
            f"inconclusive); {self.skipped} not tried: a job of theirs ran past {job_timeout_s:.0f} s or out "
            f"of memory before (timeouts-{gpu_slug}.tsv)"
        )


@dataclass
class Checkpoints:
    """Every `every_s`, the kernels whose jobs finished since the last write are exported."""

    out: Path
    gpu_slug: str
    every_s: float
    log: Callable
    written_at: float = field(default_factory=time.monotonic)

    def write_if_due(self, figures: Progress) -> None:
        if figures.unexported and time.monotonic() - self.written_at >= self.every_s:
            _checkpoint(self.out, self.gpu_slug, figures, self.log)
            self.written_at = time.monotonic()


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
    _registry_ready(out, log)
    figures = Progress()
    work = _plan(
        gpu_slug=gpu_slug,
        gpus=gpus,
        out=out,
        kernels=kernels,
        limit=limit,
        reruns=reruns,
        resume=resume,
        same_card=same_card,
        job_timeout_s=job_timeout_s,
        figures=figures,
    )
    log(work.summary(waiting=figures.waiting, gpu_slug=gpu_slug, job_timeout_s=job_timeout_s))
    collect = partial(
        _collect,
        work.in_flight,
        work.pending,
        work.to_rerun,
        work.attempts,
        figures,
        reruns,
        work.keep_for_another,
        job_timeout_s + STUCK_GRACE_S,
    )
    fleet = Fleet(gpu_slug=gpu_slug, gpus=gpus, log_dir=out / "logs", job_timeout_s=job_timeout_s)
    try:
        _run(
            work,
            figures,
            fleet,
            collect=collect,
            send=partial(_send_next, work, gpu_slug=gpu_slug, gpus=gpus, log=log),
            window=2 * gpus + 1,  # messages ahead of the workers: enough to keep every card busy
            checkpoints=Checkpoints(out, gpu_slug, checkpoint_s, log) if export else None,
            stop_at=began + deadline_s,
            log=log,
        )
        _wind_down(work.in_flight, collect)
    finally:
        fleet.stop(idle=not work.in_flight)
    return _report(
        work, figures, elapsed=time.monotonic() - began, out=out, gpu_slug=gpu_slug, export=export, log=log
    )


def _plan(
    *,
    gpu_slug: str,
    gpus: int,
    out: Path,
    kernels: list[str] | None,
    limit: int | None,
    reruns: bool,
    resume: bool,
    same_card: bool,
    job_timeout_s: float,
    figures: Progress,
) -> Work:
    """The targets not measured yet (resuming: neither those a recorded job covers), and the runs
    to rerun. A one-card host keeps for another card the runs measured on its own card."""
    todo = targets(gpu_slug=gpu_slug, kernels=kernels)
    if limit is not None:
        todo = todo[:limit]
    done = measured_targets(gpu_slug=gpu_slug) if resume else {}
    unmeasured = [t for t in todo if t not in done]
    # Targets a job of an earlier sweep ran past this time limit on, or out of memory: not tried here.
    recorded = timeouts_read(out, gpu_slug) if resume else []
    skipped = timed_out_targets(unmeasured, recorded, job_timeout_s=job_timeout_s)
    # This host's cards (none on a CPU: every run is rerun here).
    host_cards = {uuid for _, uuid in local_gpus()[:gpus] if uuid} if reruns else set()
    work = Work(
        targets=len(todo),
        measured_already=len(done),
        skipped=len(skipped),
        keep_for_another=set() if same_card or len(host_cards) != 1 else host_cards,
        pending=deque(t for t in unmeasured if t not in skipped),
    )
    if reruns:
        wanted = set(todo)
        measured = [run for t, run in done.items() if t in wanted]
        _plan_reruns(
            work, measured, host_cards, gpu_slug=gpu_slug, kernels=kernels, resume=resume, figures=figures
        )
    return work


def _plan_reruns(
    work: Work,
    measured: list[BenchmarkRun],
    host_cards: set[str],
    *,
    gpu_slug: str,
    kernels: list[str] | None,
    resume: bool,
    figures: Progress,
) -> None:
    """The measured runs never rerun (less those kept for another card); resuming, also the
    older-protocol runs without a verdict and, on a host whose cards are known, the runs rerun
    only on their measuring card when that card is not one of this host's, and those to settle."""
    work.to_rerun.extend(_rerun_here(never_rerun(measured), work.keep_for_another, figures))
    if not resume:
        return
    work.to_rerun.extend(legacy_runs(gpu_slug, kernels))
    # A host whose cards are not known (no UUID read) cannot tell another card from the same.
    if host_cards:
        record = RerunRecord.read(measured)
        cross_card = same_card_runs(measured, record, elsewhere_than=host_cards)
        work.cross_card = len(cross_card)
        work.to_rerun.extend(cross_card)
        work.to_settle.extend(unsettled(measured, record, elsewhere_than=host_cards))


def _run(
    work: Work,
    figures: Progress,
    fleet: Fleet,
    *,
    collect: Callable[[], None],
    send: Callable[[], None],
    window: int,
    checkpoints: Checkpoints | None,
    stop_at: float,
    log: Callable,
) -> None:
    """Collect the jobs that finished and `send` more, up to `window` in flight, until nothing is
    left or `stop_at`. A worker that exits (its settings refused, say) ends the sweep at once: it
    never will start."""
    while time.monotonic() < stop_at and (work.to_send() or work.in_flight):
        gone = fleet.exited()
        if gone:
            log(gone)
            figures.failed.append(gone.splitlines()[0])
            return
        collect()
        if checkpoints:
            checkpoints.write_if_due(figures)
        while len(work.in_flight) < window and work.to_send():
            send()
        time.sleep(0.25)


def _send_next(work: Work, *, gpu_slug: str, gpus: int, log) -> None:
    if work.to_rerun:  # a rerun first: its run is already measured
        _send_rerun(work.to_rerun.popleft(), work.in_flight, log, gpus=gpus)
    elif work.pending:
        _send_measure(work.pending.popleft(), gpu_slug, work.in_flight, work.attempts, log)
    else:  # nothing owed is left: another rerun may settle an inconclusive run
        _send_rerun(work.to_settle.popleft(), work.in_flight, log, gpus=gpus)


def _wind_down(in_flight: dict, collect: Callable[[], None]) -> None:
    """Past the deadline: nothing new starts; what is running may finish within the grace."""
    for job_id in list(in_flight):
        job_cancel(job=RerunJob.objects.get(pk=job_id))
    grace_end = time.monotonic() + FINISH_GRACE_S
    while time.monotonic() < grace_end and RerunJob.objects.filter(pk__in=list(in_flight)).active().exists():
        time.sleep(0.5)
    collect()


def _report(
    work: Work, figures: Progress, *, elapsed: float, out: Path, gpu_slug: str, export: bool, log
) -> dict:
    """The last line and the figures; with `export`, every kernel written once more."""
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
        "left": work.left(),
        "waiting_for_another_card": figures.waiting,
        "skipped_after_timeout_or_out_of_memory": work.skipped + figures.skipped,
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
        log(rerun_plugin().rerun_targets_load())
    if out.is_dir() and controlled.controlled_files(out):
        log(controlled.controlled_runs_load(path=out))


def _rerun_here(
    runs: list[BenchmarkRun], keep_for_another: set[str], figures: Progress
) -> list[BenchmarkRun]:
    """Of `runs` (none rerun yet), those to rerun on this host: all, unless the card that measured
    one is in `keep_for_another` (this one-card host's card), where a rerun could not make it
    `reproduced`; those are counted in `figures.waiting`. In one query."""
    if not keep_for_another:
        return runs
    measured_on = measured_cards(runs)
    here = [run for run in runs if measured_on.get(run.pk) not in keep_for_another]
    figures.waiting += len(runs) - len(here)
    return here


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
    (timeouts.py: the same kernel and provider, any pass, or its own pass for one out of
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
