"""The pipeline for real: a Celery worker process on Redis runs the harness on the CPU.

request → queue gpu.cpu → claim → harness (upstream Liger setup functions, CPU wall clock) →
result on the default queue → rerun_record_result → evidence level."""

import re
import time

import pytest

from registry.models import BenchmarkRun, Kernel
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import job_send, measure_request, rerun_request
from tests.reruns.worker import Worker, broker_clear, broker_is_redis, queue_length

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not broker_is_redis(), reason="the worker tests need Redis (CELERY_BROKER_URL)"),
]
FINISHED = {JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED}
JOB_TIMEOUT = 90


@pytest.fixture(scope="module")
def worker(django_db_setup, tmp_path_factory, harness_root):
    broker_clear()
    worker = Worker(tmp_path_factory.mktemp("worker")).start()
    yield worker
    worker.stop()
    broker_clear()


def finished(job, worker, *, watch: BenchmarkRun | None = None, levels: list | None = None):
    """Wait for the job to finish; meanwhile note every level the watched run shows."""

    def done():
        level = watch and BenchmarkRun.objects.values_list("evidence_level", flat=True).get(pk=watch.pk)
        job.refresh_from_db()
        if job.state in FINISHED:
            return True
        if watch is not None:
            levels.append(level)  # read while the job was still queued or running
        return False

    worker.wait_for(done, JOB_TIMEOUT, f"job {job.pk} to finish", interval=0.1)
    return job


def measure_on_cpu(run: BenchmarkRun) -> RerunJob:
    return measure_request(
        kernel=Kernel.objects.get(slug=run.kernel.slug),
        providers=[run.implementation.provider],
        operation_modes=[run.operation_mode],
        metrics=[run.metric],
        workloads=[run.workload],
        gpu_slug="cpu",
    ).created[0]


class TestCpuRunReproduced:
    def test_a_cpu_measurement_then_its_rerun_makes_the_run_reproduced(self, worker, h200_run):
        measure = finished(measure_on_cpu(h200_run), worker)
        assert measure.state == JobState.SUCCEEDED, measure.error
        run = measure.result_run
        assert (run.evidence_level, run.environment.slug, run.unit) == ("measured", "cpu", "ms")
        assert run.protocol.comparability_family == "kernelindex/cpu-v1"
        assert len(measure.samples) >= 10
        assert measure.sampling["protocol"] == "kernelindex-cpu-v1"
        assert measure.sampling["stop"] in ("precision", "budget")
        assert set(measure.upstream) == {"median", "p20", "p80"}
        assert measure.environment["torch"]

        levels = []
        rerun = finished(rerun_request(run=run), worker, watch=run, levels=levels)

        interval = (rerun.error, rerun.deviation_low, rerun.deviation_high, rerun.tolerance)
        assert (rerun.state, rerun.verdict) == (JobState.SUCCEEDED, "agrees"), interval
        assert set(levels) == {"measured"}  # never changed while queued or running
        run.refresh_from_db()
        assert run.evidence_level == "reproduced"
        assert (rerun.attempts, rerun.environment["gpu_slug"]) == (1, "cpu")
        assert rerun.sampling["basis"] == "samples"  # its own protocol: samples against samples
        assert -rerun.tolerance <= rerun.deviation_low <= rerun.deviation_high <= rerun.tolerance


class TestOutcomesThatLeaveTheLevel:
    def test_a_rerun_that_disagrees_is_diverged_and_leaves_the_level(self, worker, far_off_cpu_run):
        job = finished(rerun_request(run=far_off_cpu_run), worker)
        assert (job.state, job.verdict) == (JobState.DIVERGED, "disagrees"), job.error
        assert job.deviation > 1000
        assert job.deviation_low > job.tolerance
        far_off_cpu_run.refresh_from_db()
        assert far_off_cpu_run.evidence_level == "reported"

    def test_a_failed_harness_raises_nothing_and_marks_the_job_failed_with_its_log(
        self, worker, broken_cpu_run
    ):
        job = finished(rerun_request(run=broken_cpu_run), worker)
        assert job.state == JobState.FAILED
        assert job.error
        assert job.log
        broken_cpu_run.refresh_from_db()
        assert broken_cpu_run.evidence_level == "reported"
        assert "Task registry.job_execute[" in worker.log()
        assert "raised unexpected" not in worker.log()


class TestDeliveries:
    def test_a_duplicate_delivery_does_nothing(self, worker, h200_run):
        mark = worker.mark()
        job = measure_on_cpu(h200_run)
        job_send(job_id=job.pk, queue=job.queue)  # the same message a second time

        finished(job, worker)
        worker.wait_for(
            lambda: re.findall(r"registry\.job_execute\[[^]]+\] succeeded", worker.log(since=mark))[1:],
            30,
            "the second delivery to be handled",
        )

        assert job.state == JobState.SUCCEEDED, job.error
        assert job.attempts == 1
        assert BenchmarkRun.objects.filter(source__slug="kernelindex-controlled").count() == 1

    def test_a_job_for_another_gpu_is_not_taken(self, worker, h200_run):
        job = rerun_request(run=h200_run)
        assert queue_length("gpu.nvidia-h200") == 1
        # Even delivered to this CPU worker by mistake, it is sent back, never run.
        job_send(job_id=job.pk, queue="gpu.cpu")
        worker.wait_for(lambda: queue_length("gpu.nvidia-h200") == 2, 30, "the job to be sent back")

        job.refresh_from_db()
        assert (job.state, job.attempts, job.worker_host) == (JobState.QUEUED, 0, "")
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == "reported"


def test_a_worker_killed_mid_job_leaves_the_level_and_the_job_completes_once_after_restart(
    worker, h200_run, tmp_path
):
    run = finished(measure_on_cpu(h200_run), worker).result_run
    worker.stop()  # the module's worker steps aside; this test has its own
    # A lost message comes back after the visibility timeout: shorter here, so the test is short.
    short = {"CELERY_VISIBILITY_TIMEOUT": "25", "JOB_HARNESS_TIMEOUT": "20"}
    try:
        first = Worker(tmp_path, **short).start()
        job = rerun_request(run=run)
        first.wait_for(
            lambda: RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).exists(),
            60,
            "the job to start",
        )
        first.kill()

        job.refresh_from_db()
        run.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.RUNNING, 1)
        assert run.evidence_level == "measured"
        time.sleep(4)  # past JOB_STALE_AFTER: nothing changed while no worker ran
        run.refresh_from_db()
        assert run.evidence_level == "measured"

        second = Worker(tmp_path, **short).start()
        try:
            # The unacknowledged message comes back after the visibility timeout; the stale
            # heartbeat lets the new attempt claim it.
            finished(job, second)
            assert job.state == JobState.SUCCEEDED, job.error
            assert job.attempts == 2
            run.refresh_from_db()
            assert run.evidence_level == "reproduced"
            finished_at = job.finished_at
            time.sleep(2)
            job.refresh_from_db()
            assert (job.finished_at, job.attempts) == (finished_at, 2)
            assert queue_length("gpu.cpu") == 0
        finally:
            second.stop()
    finally:
        worker.start()
