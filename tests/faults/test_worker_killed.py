"""Item 1: a worker killed in the middle of a rerun job, on Redis, with real Celery workers.

The job completes once after the restart: one attempt records, the others find nothing of theirs,
and the run's level changes at most once (reported → reproduced). Three ways back are measured:
the pool process killed (Celery requeues the message at once: reject on worker lost), the
whole worker killed with the message left unacknowledged (kombu restores it after the
visibility timeout), and the whole worker killed with the reconciler running (stale heartbeat →
queued → sent again), plus a queued job whose message was really lost (the queue purged)."""

import os
import signal
import time

import pytest

from bench.servers import wait_until
from registry.models import BenchmarkRun
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import rerun_request
from tests.faults.support import figure, levels_seen, needs_redis, small_cpu_rows
from tests.faults.workers import FaultWorker, machine_lost, running, watch_until_finished
from tests.reruns.conftest import csv_import
from tests.reruns.worker import broker_key, queue_length, redis_client

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_redis]


def completed_once(job: RerunJob, run: BenchmarkRun, levels: list[str], *workers: FaultWorker) -> None:
    assert job.state == JobState.SUCCEEDED, (job.error, job.deviation)
    leases = [lease for worker in workers for lease in worker.claims(job.pk)]
    assert len(leases) == job.attempts == len(set(leases))
    outcomes = [outcome for worker in workers for outcome in worker.recorded()]
    assert [o for o in outcomes if o != "not this attempt's"] == ["succeeded"]
    run.refresh_from_db()
    assert run.evidence_level == "reproduced"
    assert levels_seen(levels) == ["reported", "reproduced"]  # one change, at the end
    assert BenchmarkRun.objects.count() == 1  # a rerun adds no run


class TestPoolProcessKilled:
    def test_the_job_is_claimed_again_once_stale_and_completes_once(
        self, slow_cpu_run, clean_broker, tmp_path
    ):
        worker = FaultWorker(tmp_path).start()
        try:
            job = rerun_request(run=slow_cpu_run)
            running(job)
            time.sleep(1.0)  # the harness is starting or timing: mid-job
            killed_at = time.time()
            os.kill(worker.pool_child(), signal.SIGKILL)
            levels = watch_until_finished(job, slow_cpu_run)

            assert "WorkerLostError" in worker.log()
            assert job.attempts == 2
            completed_once(job, slow_cpu_run, levels, worker)
            figure(
                "item1.pool_child_killed.seconds_to_new_attempt",
                round(job.started_at.timestamp() - killed_at, 2),
                note="requeued at once (reject_on_worker_lost); claimed once the heartbeat was "
                "JOB_STALE_AFTER=3 s stale",
            )
        finally:
            worker.stop()


class TestWholeWorkerKilled:
    def test_kombu_restores_the_unacknowledged_message_after_the_visibility_timeout(
        self, slow_cpu_run, clean_broker, tmp_path
    ):
        # A visibility timeout shorter than the job on purpose, so the test takes seconds, not hours.
        short = {"CELERY_VISIBILITY_TIMEOUT": "12", "CELERY_VISIBILITY_TIMEOUT_UNCHECKED": "1"}
        first = FaultWorker(tmp_path, **short).start()
        job = rerun_request(run=slow_cpu_run)
        running(job)
        time.sleep(1.0)
        killed_at = machine_lost(first)
        assert redis_client().zcard(broker_key("unacked_index")) == 1  # the message is held, unacknowledged

        second = FaultWorker(tmp_path, **short).start()
        ready_at = time.time()
        try:
            levels = watch_until_finished(job, slow_cpu_run)
            assert job.attempts == 2
            completed_once(job, slow_cpu_run, levels, first, second)
            # The job is finished once the recorder commits; the recorder's own message (acks_late)
            # leaves the unacked index a moment after that.
            wait_until(
                lambda: redis_client().zcard(broker_key("unacked_index")) == 0,
                10,
                "no unacknowledged message",
            )
            figure(
                "item1.worker_killed.kombu.seconds_to_new_attempt",
                round(job.started_at.timestamp() - killed_at, 2),
                after_restart_s=round(job.started_at.timestamp() - ready_at, 2),
                visibility_timeout_s=12,
                restore_interval_s=1,
            )
        finally:
            second.stop()

    def test_the_reconciler_puts_the_job_back_and_sends_again_a_lost_message(
        self, tmp_path, clean_broker, db
    ):
        csv_import(tmp_path / "runs.csv", small_cpu_rows(2))
        runs = list(BenchmarkRun.objects.order_by("pk"))
        # The reconciler every second; kombu's own restore out of reach (90 s) so it cannot help.
        env = {"JOB_RECONCILE_INTERVAL": "1", "JOB_RESEND_AFTER": "5"}
        first = FaultWorker(tmp_path, beat=True, **env).start()
        killed = rerun_request(run=runs[0])
        running(killed)
        time.sleep(0.5)
        killed_at = machine_lost(first)

        # While no worker runs, a second job is requested and its message is really lost.
        lost = rerun_request(run=runs[1])
        assert queue_length("gpu.cpu") == 1
        redis_client().delete(broker_key("gpu.cpu"))
        assert queue_length("gpu.cpu") == 0

        second = FaultWorker(tmp_path, beat=True, **env).start()
        ready_at = time.time()
        try:
            levels = watch_until_finished(killed, runs[0])
            watch_until_finished(lost, runs[1])
            assert "registry.jobs_reconcile" in second.log()
            assert killed.attempts == 2
            assert lost.attempts == 1 and lost.state in {JobState.SUCCEEDED, JobState.DIVERGED}
            for job in (killed, lost):
                assert len(first.claims(job.pk) + second.claims(job.pk)) == job.attempts
            assert levels_seen(levels)[0] == "reported" and len(levels_seen(levels)) <= 2
            figure(
                "item1.worker_killed.reconciler.seconds_to_new_attempt",
                round(killed.started_at.timestamp() - killed_at, 2),
                after_restart_s=round(killed.started_at.timestamp() - ready_at, 2),
                stale_after_s=3,
                reconcile_interval_s=1,
            )
            figure(
                "item1.message_lost.seconds_to_claim",
                round((lost.started_at - lost.created_at).total_seconds(), 2),
                resend_after_s=5,
            )
        finally:
            second.stop()
