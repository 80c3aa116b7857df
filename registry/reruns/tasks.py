"""Celery tasks of the controlled-run pipeline (task names stay `registry.*`: messages already in a
queue keep their meaning). The GPU-side task claims a job, runs the harness and sends the result
on; the central task on the `default` queue records it through the one service that applies the
evidence rule. Both can be delivered twice or killed halfway: the claim and the lease decide.
"""

import logging
import socket
import threading
import time
import traceback
from contextlib import contextmanager
from functools import cache

from celery import shared_task
from celery.exceptions import MaxRetriesExceededError
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
    claim = services.job_claim(
        job_id=job_id, gpu_slug=gpu, worker_host=socket.gethostname(), gpu_uuid=worker_gpu()[1]
    )
    if claim.outcome == "busy":
        # Another attempt holds it and is alive; look again once it could have gone stale.
        logger.info("Job %s is held by a live attempt; looking again later", job_id)
        try:
            raise self.retry(countdown=settings.JOB_STALE_AFTER, max_retries=8)
        except MaxRetriesExceededError:
            return claim.outcome  # jobs_reconcile looks after it from here
    if claim.outcome != "claimed":
        return claim.outcome  # finished, cancelled or gone: a duplicate delivery does nothing
    logger.info("Job %s claimed: attempt lease %s", job_id, claim.lease)
    if claim.spec != signed["spec"]:
        # The row no longer says what was signed: run neither.
        services.job_fail(
            job_id=job_id, lease=claim.lease, error="The job's spec differs from the signed one."
        )
        return "refused"
    with _heartbeat(job_id, claim.lease):
        result = _harness_run(job_id, claim)  # claim.spec: equal to the signed spec, checked above
        # Still beating while the result is handed on: a broker that is restarting must not
        # make this attempt look lost. A result that still cannot be sent raises; the heartbeat
        # then stops and jobs_reconcile gives the job to a next attempt.
        job_record.apply_async(
            args=[job_id, claim.lease, result],
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            retry=True,
            retry_policy=RESULT_PUBLISH_RETRY,
        )
        # Once the heartbeat stops, the result may wait in the default queue behind other tasks;
        # the mark keeps the reconciler from re-running a job whose result is on its way. Without
        # it (the database is down just now) the job is as before: re-run if the result is not
        # recorded within JOB_STALE_AFTER, and the late result refused.
        _attempt_write(
            services.job_result_sent, job_id, claim.lease, "Job %s: could not mark its result as sent"
        )
    return result.get("status", "")


def _attempt_write(write, job_id: int, lease: str, failure: str) -> None:
    """One write of a running attempt's own (`write(job_id=, lease=)`) that a passing database
    outage may skip: logged (`failure`, a format of the job id), and the broken connection closed
    (it is not reopened by itself)."""
    try:
        write(job_id=job_id, lease=lease)
    except TRANSIENT_ERRORS:
        logger.warning(failure, job_id, exc_info=True)
        connection.close()


def _harness_run(job_id: int, claim) -> dict:
    from registry.reruns.ceilings import ceilings_result
    from registry.reruns.harness import run_job_spec

    run = ceilings_result if claim.spec.get("kind") == "ceilings" else run_job_spec
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
        try:
            while not stop.wait(settings.JOB_HEARTBEAT_INTERVAL):
                _attempt_write(
                    services.job_heartbeat, job_id, lease, "Heartbeat of job %s failed; trying again"
                )
        finally:
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
def job_record(job_id: int, lease: str, result: dict) -> str:
    """Record a harness result; a second delivery, or a result from a stale attempt, is ignored."""
    job = services.rerun_record_result(job_id=job_id, lease=lease, result=result)
    return job.state if job is not None else "not this attempt's"


@shared_task(name="registry.jobs_reconcile", acks_late=True, autoretry_for=TRANSIENT_ERRORS, max_retries=3)
def jobs_reconcile_task() -> dict:
    return services.jobs_reconcile()
