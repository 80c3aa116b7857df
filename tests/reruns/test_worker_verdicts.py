"""Verdicts through the real pipeline, on either broker CI runs (Redis with PostgreSQL, and the
embedded filesystem broker with SQLite): a Celery worker process runs liger-kernel's upstream
code on the CPU under kernelindex-cpu-v1, and the real recorder gives the verdict.

measure job → measured run with samples → rerun → `agrees` (the worker's tolerance is generous:
CPU wall clock on a shared machine); a source run whose published p20–p80 is far wider than any
tolerance → `inconclusive`, whatever the machine measures."""

import pytest

from attestations.models import IssueReport
from registry.models import BenchmarkRun, EvidenceLevel, Kernel
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import measure_request, rerun_request
from registry.stats import medians as stats
from tests.reruns.conftest import csv_import, row
from tests.reruns.worker import Worker, broker_clear, broker_is_filesystem, broker_is_redis

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (broker_is_redis() or broker_is_filesystem()),
        reason="a worker process needs a broker it can share: Redis or the filesystem transport",
    ),
]
FINISHED = {JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED}
JOB_TIMEOUT = 120


@pytest.fixture(scope="module")
def worker(django_db_setup, tmp_path_factory, harness_root):
    broker_clear()
    worker = Worker(tmp_path_factory.mktemp("worker")).start()
    yield worker
    worker.stop()
    broker_clear()


def finished(job: RerunJob, worker: Worker) -> RerunJob:
    def done():
        job.refresh_from_db()
        return job.state in FINISHED

    worker.wait_for(done, JOB_TIMEOUT, f"job {job.pk} to finish", interval=0.1)
    return job


def interval(job: RerunJob) -> str:
    return (
        f"verdict {job.verdict!r}: {job.deviation!r} in [{job.deviation_low!r}, {job.deviation_high!r}] "
        f"against ±{job.tolerance!r}; {job.verdict_note} {job.error}"
    )


def straddles(job: RerunJob) -> bool:
    """Neither wholly inside ±tolerance nor wholly outside it."""
    low, high, tolerance = job.deviation_low, job.deviation_high, job.tolerance
    return (low < -tolerance or high > tolerance) and low <= tolerance and high >= -tolerance


class TestACpuRunThroughTheRealPipeline:
    def test_measured_under_kernelindex_cpu_v1_then_rerun_to_an_agreeing_verdict(self, worker, h200_run):
        measure = measure_request(
            kernel=Kernel.objects.get(slug="geglu"),
            providers=["huggingface"],
            operation_modes=["forward"],
            metrics=["latency"],
            workloads=[h200_run.workload],
            gpu_slug="cpu",
        ).created[0]

        measure = finished(measure, worker)

        assert measure.state == JobState.SUCCEEDED, (measure.error, measure.log[-2000:])
        run = measure.result_run
        assert (run.evidence_level, run.protocol.comparability_family) == ("measured", "kernelindex/cpu-v1")
        assert len(measure.samples) >= 10
        # The run's figures are its samples' (upstream's own figure is kept beside them).
        assert (run.median, run.p20, run.p80) == pytest.approx(stats.quantiles(measure.samples))
        assert measure.sampling["protocol"] == "kernelindex-cpu-v1"
        assert measure.sampling["stop"] in ("precision", "budget")
        assert measure.sampling["timing_s"] > 0 and "process_start_s" in measure.sampling
        assert set(measure.upstream) == {"median", "p20", "p80"}
        assert (measure.gpu_uuid, measure.gpu_state) == ("", {})  # no NVML on a CPU

        rerun = finished(rerun_request(run=run), worker)

        assert rerun.state == JobState.SUCCEEDED, interval(rerun)
        assert rerun.verdict == "agrees", interval(rerun)
        assert rerun.sampling["basis"] == "samples"
        assert (
            f"Rerun: {len(rerun.samples)} samples; recorded run: {len(measure.samples)} samples"
            in rerun.verdict_note
        )
        assert -rerun.tolerance <= rerun.deviation_low <= rerun.deviation_high <= rerun.tolerance
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPRODUCED


class TestAnInconclusiveVerdictForReal:
    def test_a_source_range_wider_than_the_tolerance_leaves_the_verdict_open_and_the_level_alone(
        self, worker, tmp_path
    ):
        # A source that published p20 0.001 ms and p80 100 ms around a median of 1 ms: whatever the
        # CPU measures (below 4 ms), the interval reaches far below −400% and ends within ±400%.
        csv_import(
            tmp_path / "wide.csv", [row("huggingface", "forward", gpu="cpu", y=(1.0, 0.001, 100.0), x=40)]
        )
        run = BenchmarkRun.objects.get(environment__slug="cpu", workload__parameters__T=40)

        job = finished(rerun_request(run=run), worker)

        assert job.state == JobState.SUCCEEDED, interval(job)
        assert job.deviation_low is not None and straddles(job), interval(job)
        assert job.verdict == "inconclusive", interval(job)
        assert job.sampling["basis"] == "upstream"
        assert "another rerun may settle it" in job.verdict_note
        assert len(job.samples) >= 2  # the rerun measured under KernelIndex's protocol too
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPORTED
        assert not IssueReport.objects.filter(run=run).exists()
