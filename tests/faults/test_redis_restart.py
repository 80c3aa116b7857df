"""Item 3: Redis restarted mid-queue, with N jobs queued and one running; and Redis killed
(SIGKILL: a crash, no shutdown save) at the same point.

Redis runs in the documented production shape (append-only file, fsync every second) on a port
of its own, so restarting it touches nobody else. The restart keeps the N queued messages and
the running one's unacknowledged entry; the worker reconnects by itself (no restart of it), the
running job hands its result on once Redis is back, and all N + 1 jobs complete, once each. After
a crash Redis holds what its append-only file held; whatever message that lost, the reconciler
(beat, JOB_RESEND_AFTER) sends again, and every job still completes once."""

import signal
import time

import pytest
from kombu import Connection

from bench.servers import RedisServer, free_port
from registry.models import BenchmarkRun
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import job_send, rerun_request
from tests.faults.support import SLOW_ROW, figure, needs_redis, small_cpu_rows
from tests.faults.workers import FaultWorker, running, until
from tests.reruns.conftest import csv_import
from tests.reruns.worker import broker_clear

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_redis]
QUEUED = 5
COMPLETED = {JobState.SUCCEEDED, JobState.DIVERGED}


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path / "redis", free_port(6390)).start()
    yield server
    server.stop()


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "sigkill"])
def test_all_queued_jobs_complete_after_redis_goes_down_and_the_worker_resumes_by_itself(
    own_redis, tmp_path, clean_broker, crash
):
    csv_import(tmp_path / "runs.csv", [SLOW_ROW, *small_cpu_rows(QUEUED)])
    slow = BenchmarkRun.objects.get(workload__parameters__T=256)
    others = list(BenchmarkRun.objects.exclude(pk=slow.pk).order_by("pk"))
    jobs = [rerun_request(run=run) for run in [slow, *others]]
    broker_clear()  # their first messages went to the suite's broker; they are sent to ours below

    broker = Connection(own_redis.url)
    # Beat (the reconciler) only where a message may be lost; a resend after 30 s, longer than any
    # job here waits in the queue, sends again only what the crash lost.
    reconciler = {"JOB_RECONCILE_INTERVAL": "1", "JOB_RESEND_AFTER": "30"} if crash else {}
    # Its own Redis, so no key prefix (tests/settings.py gives one per xdist worker): `broker` and
    # the queue lengths below name the keys as they are.
    worker = FaultWorker(
        tmp_path, beat=crash, CELERY_BROKER_URL=own_redis.url, CELERY_BROKER_KEY_PREFIX="", **reconciler
    ).start()
    try:
        job_send(job_id=jobs[0].pk, queue="gpu.cpu", connection=broker)
        running(jobs[0])
        for job in jobs[1:]:
            job_send(job_id=job.pk, queue="gpu.cpu", connection=broker)
        client = own_redis.client()
        assert client.llen("gpu.cpu") == QUEUED
        assert client.zcard("unacked_index") == 1

        if crash:
            own_redis.stop(sig=signal.SIGKILL)
            time.sleep(2.0)
            own_redis.start()
        else:
            time.sleep(1.2)  # the append-only file is fsynced every second
            own_redis.restart(down_for=2.0)
        back_at = time.time()
        client = own_redis.client()
        survived = (client.llen("gpu.cpu"), client.zcard("unacked_index"))
        if not crash:
            # Nothing lost in the restart: every queued message and the running job's unacked
            # entry. A worker that has reconnected already may have taken one more message into
            # unacked (its prefetch counts afresh on the new connection): (QUEUED - 1, 2) in CI.
            assert sum(survived) == QUEUED + 1, survived

        until(
            lambda: RerunJob.objects.filter(pk__in=[j.pk for j in jobs], state__in=COMPLETED).count()
            == len(jobs),
            180,
            "every job to complete",
            interval=0.2,
        )
        assert worker.process.poll() is None  # the same worker process, never restarted
        log = worker.log()
        assert "Connection to broker lost" in log or "consumer: Cannot connect" in log
        for job in jobs:
            job.refresh_from_db()
            claims = worker.claims(job.pk)
            assert len(claims) == job.attempts == len(set(claims)) >= 1
        # The running job's result, sent once Redis was back, waited behind the next jobs longer
        # than JOB_STALE_AFTER: marked as sent, it was recorded, not measured a second time.
        assert jobs[0].attempts == 1
        outcomes = [o for o in worker.recorded() if o != "not this attempt's"]
        assert len(outcomes) == len(jobs)  # one recorded result per job
        first_after = min(j.started_at.timestamp() for j in jobs[1:])
        kind = "redis_sigkill" if crash else "redis_restart"
        figure(
            f"item3.{kind}.seconds_to_next_claim_after_redis_back",
            round(first_after - back_at, 2),
            queued=QUEUED,
            running=1,
            messages_after=survived,
            completed=len(jobs),
            running_job_attempts=jobs[0].attempts,
        )
        figure(
            f"item3.{kind}.seconds_until_all_complete",
            round(max(j.finished_at.timestamp() for j in jobs) - back_at, 2),
        )
    finally:
        worker.stop()
        broker.release()
