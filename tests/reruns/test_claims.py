"""Claiming a job: one attempt at a time, the right GPU model only, stale attempts taken over."""

import importlib
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import override_settings
from django.utils import timezone

from registry.reruns.harness.session import TIMED_OUT
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import (
    JobRefused,
    job_claim,
    job_fail,
    job_heartbeat,
    job_result_sent,
    jobs_reconcile,
    rerun_record_result,
    rerun_request,
)
from registry.reruns.sweep.timeouts import Timeout

pytestmark = pytest.mark.django_db


def stale(job):
    RerunJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))


class TestClaim:
    def test_a_second_delivery_finds_nothing_to_claim(self, h200_run):
        job = rerun_request(run=h200_run)
        first = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a")
        second = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="b")
        assert (first.outcome, second.outcome) == ("claimed", "busy")
        job.refresh_from_db()
        assert (job.state, job.attempts, job.lease, job.worker_host) == (
            JobState.RUNNING,
            1,
            first.lease,
            "a",
        )

    def test_the_claim_records_the_card_so_a_job_killed_before_its_result_still_names_it(self, h200_run):
        """A job killed at the time limit sends no result, where the card used to be recorded:
        the two jobs timed out on GPU-31441cc4 (2026-12-04) were written to the timeouts file without a card."""
        job = rerun_request(run=h200_run)
        first = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a", gpu_uuid="GPU-card-A")
        stale(job)
        job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="b", gpu_uuid="GPU-card-B")
        assert not job_heartbeat(job_id=job.pk, lease=first.lease)
        job_fail(job_id=job.pk, error=f"Harness failed: {TIMED_OUT}")
        job.refresh_from_db()
        assert (job.state, job.gpu_uuid) == (JobState.FAILED, "GPU-card-B")  # the last attempt's card
        assert Timeout.from_job(job, ran_s=360).gpu_uuid == "GPU-card-B"

    def test_a_worker_with_another_gpu_does_not_take_it(self, h200_run):
        job = rerun_request(run=h200_run)
        claim = job_claim(job_id=job.pk, gpu_slug="cpu", worker_host="a")
        assert (claim.outcome, claim.queue) == ("wrong_gpu", "gpu.nvidia-h200")
        job.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.QUEUED, 0)

    def test_a_stale_attempt_is_taken_over_with_a_new_lease(self, h200_run):
        job = rerun_request(run=h200_run)
        first = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a")
        stale(job)
        second = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="b")
        assert second.outcome == "claimed"
        assert second.lease != first.lease
        assert not job_heartbeat(job_id=job.pk, lease=first.lease)
        assert job_heartbeat(job_id=job.pk, lease=second.lease)
        job.refresh_from_db()
        assert job.attempts == 2

    @override_settings(JOB_MAX_ATTEMPTS=2)
    def test_a_job_whose_worker_is_lost_too_often_fails(self, h200_run):
        job = rerun_request(run=h200_run)
        for _ in range(2):
            assert job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a").outcome == "claimed"
            stale(job)
        assert job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a").outcome == "gone"
        job.refresh_from_db()
        h200_run.refresh_from_db()
        assert job.state == JobState.FAILED
        assert "2 attempts" in job.error
        assert h200_run.evidence_level == "reported"

    def test_a_cancelled_job_is_not_claimed(self, h200_run):
        from registry.reruns.services import job_cancel

        job = rerun_request(run=h200_run)
        assert job_cancel(job=job)
        assert job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a").outcome == "gone"


class TestReconcile:
    def test_a_running_job_with_a_stale_heartbeat_goes_back_to_its_queue(
        self, h200_run, django_capture_on_commit_callbacks
    ):
        job = rerun_request(run=h200_run)
        job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a")
        stale(job)
        with django_capture_on_commit_callbacks() as sent:
            counts = jobs_reconcile()
        assert counts == {"requeued": 1, "failed": 0, "resent": 0}
        assert len(sent) == 1
        job.refresh_from_db()
        assert (job.state, job.lease) == (JobState.QUEUED, "")

    def test_a_live_job_is_left_alone(self, h200_run, django_capture_on_commit_callbacks):
        job = rerun_request(run=h200_run)
        job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a")
        with django_capture_on_commit_callbacks() as sent:
            assert jobs_reconcile() == {"requeued": 0, "failed": 0, "resent": 0}
        assert sent == []
        job.refresh_from_db()
        assert job.state == JobState.RUNNING

    def test_a_job_whose_result_was_sent_waits_to_be_recorded_until_the_deadline(
        self, h200_run, django_capture_on_commit_callbacks, settings
    ):
        """The heartbeat stops once the result is sent; the result may wait behind other tasks."""
        job = rerun_request(run=h200_run)
        claim = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="a")
        assert job_result_sent(job_id=job.pk, lease=claim.lease)
        stale(job)
        with django_capture_on_commit_callbacks() as sent:
            assert jobs_reconcile() == {"requeued": 0, "failed": 0, "resent": 0}
        assert sent == []
        assert job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="b").outcome == "busy"
        job.refresh_from_db()
        assert (job.state, job.lease, job.attempts) == (JobState.RUNNING, claim.lease, 1)

        RerunJob.objects.filter(pk=job.pk).update(
            result_sent_at=timezone.now() - timedelta(seconds=settings.JOB_RESULT_DEADLINE + 1)
        )
        with django_capture_on_commit_callbacks() as sent:
            assert jobs_reconcile()["requeued"] == 1  # past the deadline the result is lost
        job.refresh_from_db()
        assert (job.state, job.lease, job.result_sent_at) == (JobState.QUEUED, "", None)
        again = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="b")
        assert again.outcome == "claimed"
        assert not job_result_sent(job_id=job.pk, lease=claim.lease)  # the old attempt's mark

    def test_a_queued_job_whose_message_may_be_lost_is_sent_again(
        self, h200_run, django_capture_on_commit_callbacks
    ):
        job = rerun_request(run=h200_run)
        RerunJob.objects.filter(pk=job.pk).update(sent_at=timezone.now() - timedelta(days=1))
        with django_capture_on_commit_callbacks() as sent:
            assert jobs_reconcile()["resent"] == 1
        assert len(sent) == 1
        job.refresh_from_db()
        assert job.state == JobState.QUEUED


@pytest.mark.django_db(transaction=True)
class TestConcurrentRequests:
    def test_two_concurrent_requests_give_one_active_job_and_one_refusal(self, h200_run):
        barrier = threading.Barrier(2)
        outcomes = []

        def request():
            try:
                barrier.wait()
                outcomes.append(rerun_request(run=h200_run).pk)
            except JobRefused as refusal:
                outcomes.append(str(refusal))
            finally:
                connection.close()

        threads = [threading.Thread(target=request) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(type(o).__name__ for o in outcomes) == ["int", "str"]
        assert "already has an active rerun" in next(o for o in outcomes if isinstance(o, str))
        assert RerunJob.objects.active().filter(run=h200_run).count() == 1


class TestTimedOut:
    """A job killed at its time limit is marked so (the sweep, the admin and the API filter on the
    mark, not on its error's words), by the recorder from the harness's result and, for the jobs
    of before the mark, by the migration that added it."""

    def test_the_recorder_marks_a_job_the_harness_killed_at_its_limit(self, h200_run, client):
        killed = rerun_request(run=h200_run)
        claim = job_claim(job_id=killed.pk, gpu_slug="nvidia-h200", worker_host="a")
        rerun_record_result(
            job_id=killed.pk,
            lease=claim.lease,
            result={"status": "failed", "error": TIMED_OUT, "timed_out": True},
        )
        crashed = rerun_request(run=h200_run)
        claim = job_claim(job_id=crashed.pk, gpu_slug="nvidia-h200", worker_host="a")
        rerun_record_result(
            job_id=crashed.pk,
            lease=claim.lease,
            result={"status": "failed", "error": "SIGSEGV", "timed_out": False},
        )

        marks = dict(RerunJob.objects.values_list("pk", "timed_out"))
        assert marks == {killed.pk: True, crashed.pk: False}
        listed = client.get("/api/v1/jobs/", {"timed_out": "true"}).json()["results"]
        assert [job["id"] for job in listed] == [killed.pk]
        assert client.get("/api/v1/jobs/", {"timed_out": "sometimes"}).status_code == 400

    def test_the_migration_marks_the_jobs_whose_error_said_so(self, h200_run):
        said = rerun_request(run=h200_run)
        RerunJob.objects.filter(pk=said.pk).update(
            state=JobState.FAILED, error=f"Harness failed: {TIMED_OUT}"
        )
        other = rerun_request(run=h200_run)
        RerunJob.objects.filter(pk=other.pk).update(state=JobState.FAILED, error="Harness failed: SIGSEGV")
        name = "0012_rerunjob_timed_out"
        migration = importlib.import_module(f"registry.migrations.{name}")
        # The job model as that migration saw it (it lived in the registry app then).
        historical = MigrationLoader(connection).project_state(("registry", name)).apps

        migration.timed_out_mark(historical, None)

        assert dict(RerunJob.objects.values_list("pk", "timed_out")) == {said.pk: True, other.pk: False}
