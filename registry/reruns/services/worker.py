"""What a GPU worker does to a job, through the database: claim it for one attempt, keep the
attempt alive, say its result is on its way, or fail it. None of these touches an evidence level."""

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from registry.cache import generation_bump
from registry.reruns.harness.spec import DTYPES
from registry.reruns.models import JobKind, JobState, RerunJob

CPU_SLUG = "cpu"
LOG_LIMIT = 64_000
# The harness's own table (it states the importer's without importing it: tests/harness/).
TORCH_DTYPES = {}
for _torch_name, _short in DTYPES.items():
    TORCH_DTYPES.setdefault(_short, _torch_name)


def job_device(job: RerunJob) -> str:
    """The harness's device kind for the job's GPU model."""
    return "cpu" if job.gpu_slug == CPU_SLUG else "cuda"


@dataclass
class Claim:
    """What job_claim found: `claimed` (run it, with this lease), `busy` (another attempt holds
    it and is alive), `wrong_gpu` (this worker must not run it) or `gone` (nothing to do)."""

    outcome: str
    lease: str = ""
    spec: dict | None = None
    queue: str = ""


@transaction.atomic
def job_claim(
    *, job_id: int, gpu_slug: str, worker_host: str, worker_gpu: str = "", gpu_uuid: str = ""
) -> Claim:
    """Take the job for one attempt: queued → running, or running → running again when the
    previous attempt is lost (`RerunJob.objects.lost`). The conditional update makes a second
    delivery of the same message find nothing to claim. The attempt's card (`gpu_uuid`, NVML) is
    recorded now, so that a job killed before it sends a result still says which card ran it."""
    job = RerunJob.objects.select_related("kernel", "workload").filter(pk=job_id).first()
    if job is None or not job.is_active:
        return Claim("gone")
    if job.gpu_slug != gpu_slug:
        return Claim("wrong_gpu", queue=job.queue)
    now = timezone.now()
    claimable = (RerunJob.objects.filter(state=JobState.QUEUED) | RerunJob.objects.lost(now)).filter(
        pk=job_id
    )
    if job.attempts >= settings.JOB_MAX_ATTEMPTS:
        gave_up = claimable.update(**job_gave_up(job, now))
        if gave_up:
            generation_bump()
        return Claim("gone" if gave_up else "busy")
    lease = uuid.uuid4().hex
    updated = claimable.update(
        state=JobState.RUNNING,
        lease=lease,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        result_sent_at=None,
        started_at=now,
        worker_host=worker_host[:200],
        worker_gpu=worker_gpu[:200],
        gpu_uuid=gpu_uuid[:64],
    )
    if updated != 1:
        still_running = RerunJob.objects.filter(pk=job_id, state=JobState.RUNNING).exists()
        return Claim("busy" if still_running else "gone")
    generation_bump()  # the run page shows the job running
    return Claim("claimed", lease=lease, spec=job_spec(job))


def job_gave_up(job: RerunJob, now) -> dict:
    """The fields of a job failed for running out of attempts."""
    return {
        "state": JobState.FAILED,
        "finished_at": now,
        "lease": "",
        "error": f"Gave up after {job.attempts} attempts: the worker was lost each time.",
    }


def job_spec(job: RerunJob) -> dict:
    """Exactly the job's workload, in the harness's terms (the upstream script's arguments); for
    a ceilings job, only the device kind (registry.reruns.ceilings)."""
    if job.kind == JobKind.CEILINGS:
        return {"kind": JobKind.CEILINGS.value, "device": job_device(job)}
    workload = job.workload
    config = dict(workload.parameters)
    x_value = config.pop(workload.x_name, workload.x_value)
    if workload.dtype:
        config["dtype"] = TORCH_DTYPES[workload.dtype]
    return {
        "kernel": job.kernel.slug,
        "provider": job.provider,
        "operation_mode": job.operation_mode,
        "metric": job.metric,
        "x_name": workload.x_name,
        "x_value": x_value,
        "config": config,
        "device": job_device(job),
    }


def job_heartbeat(*, job_id: int, lease: str, worker: str | None = None) -> bool:
    """The attempt holding `lease` (granted to `worker`, when given) is alive. False once the job
    is no longer its own."""
    return _attempt_mark(job_id, lease, "heartbeat_at", worker=worker)


def job_result_sent(*, job_id: int, lease: str) -> bool:
    """The attempt holding `lease` has sent its result to the recorder: until JOB_RESULT_DEADLINE
    the job is waiting to be recorded, and neither the reconciler nor a second delivery takes it
    from that attempt, though its heartbeat has stopped. False once the job is no longer its own."""
    return _attempt_mark(job_id, lease, "result_sent_at")


def _attempt_mark(job_id: int, lease: str, field: str, worker: str | None = None) -> bool:
    # Only the attempt holding the lease writes; no generation bump, since no page shows either.
    if not lease:
        return False
    running = RerunJob.objects.filter(pk=job_id, state=JobState.RUNNING, lease=lease)
    if worker is not None:
        running = running.filter(worker_host=worker)
    return running.update(**{field: timezone.now()}) == 1


@transaction.atomic
def job_fail(*, job_id: int, error: str, lease: str | None = None, log: str = "") -> bool:
    """Mark an active job failed (for the attempt holding `lease`, when given). No level change."""
    jobs = RerunJob.objects.active().filter(pk=job_id)
    if lease is not None:
        jobs = jobs.filter(lease=lease)
    failed = jobs.update(
        state=JobState.FAILED, error=error[:LOG_LIMIT], log=bounded_log(log), finished_at=timezone.now()
    )
    if failed:
        generation_bump()
    return failed == 1


def bounded_log(text: str) -> str:
    """Keep the start and the end of a long log: the command and the traceback."""
    if len(text) <= LOG_LIMIT:
        return text
    head, tail = LOG_LIMIT // 4, LOG_LIMIT - LOG_LIMIT // 4
    return f"{text[:head]}\n… [{len(text) - LOG_LIMIT} characters left out] …\n{text[-tail:]}"
