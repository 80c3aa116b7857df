"""Celery tasks of the controlled-run pipeline (task names stay `registry.*`: messages already in a
queue keep their meaning). The GPU-side task claims a job, runs the harness and sends the result
on; the central task on the `default` queue records it through the one service that applies the
evidence rule. Both can be delivered twice or killed halfway: the claim and the lease decide.
"""

import logging
import threading
import time
import traceback
from contextlib import contextmanager
from functools import cache, partial

from celery import shared_task
from celery.exceptions import MaxRetriesExceededError
from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from registry.reruns import services

logger = logging.getLogger(__name__)
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
WRONG_GPU_DELAY_S = 30
# A measured result is worth waiting for: keep trying to hand it on through a broker restart
# (about 5 minutes), while the heartbeat keeps the attempt alive.
RESULT_PUBLISH_RETRY = {"max_retries": 60, "interval_start": 0, "interval_step": 1, "interval_max": 5}


# A rerun avoids the card that measured its run: a worker on that card hands it on this many
# times, pausing so that another card's worker takes it; a fleet of one card then runs it anyway
# (the verdict records that the same physical GPU measured both).
AVOID_PASSES = 5
AVOID_PAUSE_S = 2.0


@cache
def worker_gpu() -> tuple[str, str]:
    """This worker's GPU model and UUID, asked once per process (importing torch is slow)."""
    from registry.reruns.harness import local_gpu

    return local_gpu()


def worker_gpu_slug() -> str:
    return worker_gpu()[0]


@shared_task(
    name="registry.job_execute",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
    soft_time_limit=settings.JOB_HARNESS_TIMEOUT + 120,
    time_limit=settings.JOB_HARNESS_TIMEOUT + 180,
)
def job_execute(self, job_id: int, signed: dict | None = None, signature: str = "", passes: int = 0) -> str:
    """Run one job on this worker's GPU, if KernelIndex signed it, it is this GPU model's and
    nobody else holds it."""
    refusal = services.job_message_check(job_id=job_id, signed=signed, signature=signature)
    if refusal:
        # Never run, never claimed: the job stays queued and jobs_reconcile sends a signed one.
        logger.error("Job %s refused: %s", job_id, refusal)
        return "refused"
    gpu = worker_gpu_slug()
    if signed["gpu"] != gpu:
        # Never run it here; pass the signed message on to its own model's queue (after a pause,
        # so a worker started on the wrong queue cannot spin on it) and leave it queued.
        queue = f"gpu.{signed['gpu']}"
        logger.error("Job %s is for %s, this worker has %s: sent back to its queue", job_id, queue, gpu)
        message = {"signed": signed, "signature": signature}
        services.job_send(job_id=job_id, queue=queue, countdown=WRONG_GPU_DELAY_S, message=message)
        return "wrong_gpu"
    avoid = signed.get("avoid_gpu") or ""
    if avoid and avoid == worker_gpu()[1] and isinstance(passes, int) and passes < AVOID_PASSES:
        # This card measured the run: give another card of the fleet the rerun.
        message = {"signed": signed, "signature": signature, "passes": passes + 1}
        services.job_send(job_id=job_id, queue=f"gpu.{gpu}", message=message)
        time.sleep(AVOID_PAUSE_S)
        return "other_card"
    claim = _claim(job_id)
    if claim.outcome == "busy":
        # Another attempt holds it and is alive; look again once it could have gone stale.
        logger.info("Job %s is held by a live attempt; looking again later", job_id)
        try:
            raise self.retry(countdown=settings.JOB_STALE_AFTER, max_retries=8)
        except MaxRetriesExceededError:
            return claim.outcome  # jobs_reconcile looks after it from here
    if claim.outcome != "claimed":
        return claim.outcome  # finished, cancelled, refused or gone: a duplicate delivery does nothing
    logger.info("Job %s claimed: attempt lease %s", job_id, claim.lease)
    if claim.spec != signed["spec"]:
        # The row no longer says what was signed: run neither.
        result = {"status": "refused", "error": "The job's spec differs from the signed one.", "log": ""}
        if settings.GPU_WORKER:
            _report("result", job_id=job_id, lease=claim.lease, result=result)
        else:  # a trusted worker that also serves the default queue: in process
            services.worker_result_record(
                services.worker_report("result", job=job_id, lease=claim.lease, result=result)
            )
        return "refused"
    with _heartbeat(job_id, claim.lease):
        result = _harness_run(job_id, claim)  # claim.spec: equal to the signed spec, checked above
        # Still beating while the result is handed on: a broker that is restarting must not
        # make this attempt look lost. A result that still cannot be sent raises; the heartbeat
        # then stops and jobs_reconcile gives the job to a next attempt. Heartbeats and the
        # result go through the default queue in the order they were sent, so a reconciler's
        # run queued after the last heartbeat finds the result recorded first.
        _report("result", job_id=job_id, lease=claim.lease, result=result)
        if not settings.GPU_WORKER:
            # A trusted worker serving both queues (-c 1) may run its next job before this result
            # is recorded: the mark keeps the reconciler from taking the job meanwhile
            # (JOB_RESULT_DEADLINE). A GPU worker has no database; its heartbeats and result
            # reach the default worker in the order they were sent.
            try:
                services.job_result_sent(job_id=job_id, lease=claim.lease)
            except TRANSIENT_ERRORS:
                logger.warning("Job %s: could not mark its result as sent", job_id, exc_info=True)
                connection.close()
    return result.get("status", "")


def _claim(job_id: int):
    """Claim the job through the central worker, signed with this worker's key; the central worker
    grants the lease (a GPU worker has no database). A grant not signed by the web tier, or not
    for this job and worker, is taken as nothing to do."""
    report = services.worker_report("claim", job=job_id, card=worker_gpu()[1])
    if settings.GPU_WORKER:
        try:
            message = job_claim_request.apply_async(
                args=[report], queue=settings.CELERY_TASK_DEFAULT_QUEUE
            ).get(timeout=settings.JOB_CLAIM_WAIT, disable_sync_subtasks=False)
        except CeleryTimeoutError:
            logger.warning("Job %s: no answer to the claim within %s s", job_id, settings.JOB_CLAIM_WAIT)
            return services.Claim("busy")
    else:  # a trusted worker that also serves the default queue: the same check, in process
        message = services.worker_claim(report)
    try:
        grant = services.grant_check(message, job_id=job_id, worker=settings.WORKER_NAME)
    except services.SignatureRefused as exc:
        refused = message.get("refused") if isinstance(message, dict) else None
        logger.error("Job %s refused: %s", job_id, refused or exc)
        return services.Claim("refused")
    return services.Claim(grant["outcome"], lease=grant["lease"], spec=grant["spec"], queue=grant["queue"])


def _report(kind: str, *, job_id: int, **fields) -> None:
    """Send a signed report to the central worker (default queue), retrying through a broker restart."""
    task = job_heartbeat_report if kind == "heartbeat" else job_report
    task.apply_async(
        args=[services.worker_report(kind, job=job_id, **fields)],
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        retry=True,
        retry_policy=RESULT_PUBLISH_RETRY,
    )


def _harness_run(job_id: int, claim) -> dict:
    from registry.reruns.ceilings import ceilings_result
    from registry.reruns.harness import run_job_spec

    if claim.spec.get("kind") == "ceilings":
        run = ceilings_result
    else:
        run = partial(run_job_spec, timing=settings.CONTROLLED_TIMING)
    try:
        return run(claim.spec, timeout_s=settings.JOB_HARNESS_TIMEOUT)
    except Exception as exc:  # a harness bug becomes a failed job, never a crashed worker
        return {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "log": traceback.format_exc(),
        }


@contextmanager
def _heartbeat(job_id: int, lease: str):
    stop = threading.Event()

    def beat():
        while not stop.wait(settings.JOB_HEARTBEAT_INTERVAL):
            try:
                if settings.GPU_WORKER:
                    _report("heartbeat", job_id=job_id, lease=lease)
                else:  # a trusted worker that also serves the default queue: in process
                    services.worker_heartbeat(services.worker_report("heartbeat", job=job_id, lease=lease))
            except Exception:  # a broker or database outage: the next beat tries again
                logger.warning("Heartbeat of job %s failed; trying again", job_id, exc_info=True)
        if not settings.GPU_WORKER:
            connection.close()

    thread = threading.Thread(target=beat, name=f"heartbeat-job-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@shared_task(
    name="registry.job_record",
    acks_late=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=10,
)
def job_record(*args, **kwargs) -> str:
    """Unsigned results (what workers sent before results were signed, or a forgery) are refused."""
    logger.error("An unsigned result was refused (registry.job_record): results are signed reports now")
    return "refused: unsigned"


@shared_task(
    name="registry.job_report",
    acks_late=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=10,
)
def job_report(report: dict) -> str:
    """Record a worker's signed result; a second delivery, a result from a stale attempt or one
    that fails its checks (services.worker_keys) is ignored."""
    job = services.worker_result_record(report)
    return job.state if job is not None else "not this attempt's"


@shared_task(name="registry.job_claim", acks_late=True, ignore_result=False, autoretry_for=TRANSIENT_ERRORS)
def job_claim_request(report: dict) -> dict:
    """A GPU worker's signed claim: the central worker decides, and signs its answer."""
    return services.worker_claim(report)


@shared_task(name="registry.job_heartbeat", autoretry_for=TRANSIENT_ERRORS, max_retries=3)
def job_heartbeat_report(report: dict) -> bool:
    return services.worker_heartbeat(report)


@shared_task(name="registry.jobs_reconcile", acks_late=True, autoretry_for=TRANSIENT_ERRORS, max_retries=3)
def jobs_reconcile_task() -> dict:
    return services.jobs_reconcile()
