"""Requesting jobs: a moderator's rerun of one run, a measure sweep, a cancellation, and sending
a job's signed message to its GPU model's queue. None of these touches an evidence level."""

from dataclasses import dataclass, field
from functools import partial

from django.db import IntegrityError, transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import BenchmarkRun, Kernel
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.services.signing import job_message

EXECUTE_TASK = "registry.job_execute"


class JobRefused(Exception):
    """No job was created; the message says why, for the moderator."""


@transaction.atomic
def rerun_request(
    *,
    run: BenchmarkRun,
    requested_by=None,
    reason: str = "",
    issue_report_pk: int | None = None,
    other_card: bool = True,
) -> RerunJob:
    """Queue a rerun of `run` on its own GPU model. A run has at most one active rerun; a second
    request, even a concurrent one, is refused. The level does not change here. `other_card`:
    the rerun avoids the card that measured the run (False where the caller knows the fleet has
    one card, so that its worker need not hand the rerun on before it runs it there)."""
    active = RerunJob.objects.active().filter(kind=JobKind.RERUN, run=run).first()
    if active is not None:
        raise JobRefused(f"Run {run.pk} already has an active rerun: job #{active.pk} ({active.state}).")
    job = RerunJob.rerun_of(
        run,
        avoid_gpu_uuid=_measuring_card(run) if other_card else "",
        requested_by=requested_by,
        reason=reason,
        issue_report_pk=issue_report_pk,
    )
    if not _job_queue(job):
        # Another request for this run committed between our check and our insert.
        raise JobRefused(f"Run {run.pk} already has an active rerun.")
    generation_bump()  # the run page lists its queued rerun
    _requested_audit(job, issue_report_pk=issue_report_pk)
    return job


def _job_queue(job: RerunJob) -> bool:
    """Insert an unsaved job and send its message once the transaction commits; False, with
    nothing written, where a job of the same target is already active (the database's partial
    unique constraints decide, so two concurrent requests cannot both queue one)."""
    job.sent_at = timezone.now()
    try:
        with transaction.atomic():
            job.save(force_insert=True)
    except IntegrityError:
        return False
    send_on_commit(job)
    return True


def _requested_audit(job: RerunJob, *, issue_report_pk: int | None = None) -> None:
    """A person's request for GPU time is in the audit log with its actor, on the job and on the
    issue report it answers (KernelIndex's own requests, the sweep's, are the jobs' record)."""
    if job.requested_by is None:
        return
    from attestations.audit import audit_record
    from attestations.models import IssueReport

    action = f"{job.kind}_requested"
    audit_record(actor=job.requested_by, target=job, action=action, to_state=job.state, reason=job.reason)
    report = IssueReport.objects.filter(pk=issue_report_pk).first() if issue_report_pk else None
    if report is not None:
        audit_record(
            actor=job.requested_by, target=report, action="rerun_requested", reason=f"Rerun job #{job.pk}"
        )


def _measuring_card(run: BenchmarkRun) -> str:
    """The UUID of the card that measured a controlled run: its rerun goes to another card when
    the fleet has one, so that `reproduced` means two physical GPUs agreed."""
    measured_by = run.measured_by_jobs.filter(kind=JobKind.MEASURE).exclude(gpu_uuid="").first()
    return measured_by.gpu_uuid if measured_by else ""


@dataclass
class MeasureRequest:
    created: list[RerunJob] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@transaction.atomic
def measure_request(
    *,
    kernel: Kernel,
    providers: list[str],
    operation_modes: list[str],
    metrics: list[str],
    gpu_slug: str,
    workloads=None,
    requested_by=None,
    reason: str = "",
) -> MeasureRequest:
    """Queue one measure job per (workload, provider, pass, metric) that the registry already
    has a current run for, on the GPU model `gpu_slug`. A target with an active measure job on
    that GPU is skipped and named in the result."""
    targets = (
        BenchmarkRun.objects.current()
        .filter(
            kernel=kernel,
            implementation__provider__in=providers,
            operation_mode__in=operation_modes,
            metric__in=metrics,
        )
        .order_by("workload_id", "implementation__provider", "operation_mode", "metric")
        .values_list("workload_id", "implementation__provider", "operation_mode", "metric")
        .distinct()
    )
    if workloads is not None:
        targets = targets.filter(workload__in=workloads)
    targets = list(targets)
    if not targets:
        raise JobRefused(f"No current runs of {kernel.slug} match those implementations, passes and metrics.")
    outcome = MeasureRequest()
    for workload_id, provider, mode, metric in targets:
        job = RerunJob(
            kind=JobKind.MEASURE,
            kernel=kernel,
            workload_id=workload_id,
            provider=provider,
            operation_mode=mode,
            metric=metric,
            gpu_slug=gpu_slug,
            requested_by=requested_by,
            reason=reason,
        )
        if _job_queue(job):
            _requested_audit(job)
            outcome.created.append(job)
        else:
            outcome.skipped.append(f"workload {workload_id} {provider} {mode} {metric}: already queued")
    if outcome.created:
        generation_bump()
    return outcome


@transaction.atomic
def ceilings_request(*, gpu_slug: str, requested_by=None, reason: str = "") -> RerunJob:
    """Queue a measurement of the GPU model's own ceilings (a device-to-device copy and a bf16
    GEMM, registry.reruns.ceilings) on its queue. One active ceilings job per GPU model."""
    job = RerunJob(kind=JobKind.CEILINGS, gpu_slug=gpu_slug, requested_by=requested_by, reason=reason)
    if not _job_queue(job):
        raise JobRefused(f"{gpu_slug} already has an active ceilings job.")
    generation_bump()
    _requested_audit(job)
    return job


@transaction.atomic
@transaction.atomic
def job_cancel(*, job: RerunJob, actor=None) -> bool:
    """A queued job can be cancelled; a running one is left to finish (a worker cannot be
    stopped halfway without losing what it measured). A person's cancellation is audited."""
    cancelled = RerunJob.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
        state=JobState.CANCELLED, finished_at=timezone.now(), lease=""
    )
    if cancelled:
        generation_bump()
        if actor is not None:
            from attestations.audit import audit_record

            audit_record(
                actor=actor,
                target=job,
                action="cancelled",
                from_state=JobState.QUEUED,
                to_state=JobState.CANCELLED,
            )
    return cancelled == 1


def send_on_commit(job: RerunJob) -> None:
    # The project's one idiom for queuing after commit: on_commit(partial(...), robust=True).
    # robust: a broker that is down must not undo the request; jobs_reconcile sends it again.
    transaction.on_commit(partial(job_send, job_id=job.pk, queue=job.queue), robust=True)


def job_send(
    *,
    job_id: int,
    queue: str,
    countdown: float | None = None,
    message: dict | None = None,
    connection=None,
) -> None:
    """Send the job's signed message to a GPU model's queue (no state change; the claim decides).
    `message` sends an already signed one on as it is (a worker passing on a job for another
    GPU holds no reason to sign anything); `connection` picks another broker than the
    configured one.

    Sent by name, unlike every other task: the message goes to a queue chosen per job and
    carries a signature made here, and the task's module (registry.reruns.tasks, the worker side)
    imports these services, so importing it here would close a circle."""
    from kernelindex.celery import app

    if message is None:
        message = job_message(RerunJob.objects.select_related("kernel", "workload").get(pk=job_id))
    app.send_task(
        EXECUTE_TASK, args=[job_id], kwargs=message, queue=queue, countdown=countdown, connection=connection
    )
