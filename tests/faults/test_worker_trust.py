"""Item 13: GPU workers are less trusted than the web tier.

A worker runs only a job message that KernelIndex signed (HMAC-SHA256 over the job id, the GPU
model and the spec, under JOB_SIGNING_KEY); a result counts only for the job and the attempt
(lease) that claimed it; the harness runs only mapped kernels with checked parameters."""

import copy
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from registry.models import BenchmarkRun, JobState, RerunJob, Workload
from registry.reruns import tasks
from registry.reruns.harness import KERNELS, run_job_spec
from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.services import job_claim, job_message, job_send, rerun_request
from tests.faults.support import needs_redis, small_cpu_rows
from tests.faults.workers import FaultWorker, until
from tests.reruns.conftest import csv_import, harness_result, small_geglu_spec
from tests.reruns.worker import broker_clear

pytestmark = pytest.mark.django_db


@pytest.fixture
def cpu_run(tmp_path, db):
    csv_import(tmp_path / "runs.csv", small_cpu_rows(2))
    return BenchmarkRun.objects.select_related("environment", "workload").order_by("pk").first()


@pytest.fixture
def cpu_worker_probe(monkeypatch):
    """This test process plays a CPU worker; asking torch for the GPU is the slow part, not the
    part under test."""
    monkeypatch.setattr(tasks, "worker_gpu_slug", lambda: "cpu")


def untouched(job: RerunJob) -> None:
    job.refresh_from_db()
    assert (job.state, job.attempts, job.lease, job.worker_host) == (JobState.QUEUED, 0, "", "")


def execute(job_id: int, message: dict) -> str:
    """Deliver a message to the GPU task in this process, as a worker would run it."""
    return tasks.job_execute.apply(args=[job_id], kwargs=message).get()


class TestSignedJobMessages:
    def test_an_unsigned_message_is_refused_and_never_runs(self, cpu_run, cpu_worker_probe):
        job = rerun_request(run=cpu_run)
        assert execute(job.pk, {}) == "refused"
        untouched(job)

    def test_a_tampered_spec_is_refused_and_never_runs(self, cpu_run, cpu_worker_probe):
        job = rerun_request(run=cpu_run)
        message = job_message(job)
        tampered = copy.deepcopy(message)
        tampered["signed"]["spec"]["config"]["hidden_size"] = 1048576
        assert execute(job.pk, tampered) == "refused"
        tampered = copy.deepcopy(message)
        tampered["signed"]["spec"]["kernel"] = "rope"
        assert execute(job.pk, tampered) == "refused"
        untouched(job)

    def test_a_message_signed_for_another_job_is_refused(self, cpu_run, cpu_worker_probe):
        job = rerun_request(run=cpu_run)
        other = rerun_request(run=BenchmarkRun.objects.exclude(pk=cpu_run.pk).get())
        assert execute(job.pk, job_message(other)) == "refused"
        untouched(job)
        untouched(other)

    def test_a_message_signed_with_another_key_is_refused(self, cpu_run, cpu_worker_probe):
        job = rerun_request(run=cpu_run)
        with override_settings(JOB_SIGNING_KEY="an-attacker-s-key-of-at-least-32-chars"):
            forged = job_message(job)
        assert forged["signature"] != job_message(job)["signature"]
        assert execute(job.pk, forged) == "refused"
        untouched(job)

    def test_a_job_whose_row_changed_after_signing_fails_without_running(self, cpu_run, cpu_worker_probe):
        job = rerun_request(run=cpu_run)
        message = job_message(job)
        workload = Workload.objects.get(pk=job.workload_id)
        workload.parameters = {**workload.parameters, "hidden_size": 1048576}
        workload.save()
        assert execute(job.pk, message) == "refused"
        job.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.FAILED, 1)
        assert "differs from the signed one" in job.error
        assert job.median is None

    def test_the_signature_covers_job_gpu_and_spec(self, cpu_run):
        job = rerun_request(run=cpu_run)
        message = job_message(job)
        assert message["signed"] == {"job": job.pk, "gpu": "cpu", "spec": message["signed"]["spec"]}
        assert len(message["signature"]) == 64
        assert message["signed"]["spec"]["kernel"] == "geglu"


class TestResultsBoundToTheAttempt:
    def claim(self, job: RerunJob):
        return job_claim(job_id=job.pk, gpu_slug="cpu", worker_host="gpu-host-1")

    def record(self, job_id: int, lease: str, median: float) -> str:
        return tasks.job_record.apply(args=[job_id, lease, harness_result(median, gpu_slug="cpu")]).get()

    def test_a_result_from_a_stale_attempt_changes_nothing(self, cpu_run, settings):
        job = rerun_request(run=cpu_run)
        stale = self.claim(job)
        # The first attempt's worker was lost: its heartbeat is an hour old.
        RerunJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
        current = self.claim(job)
        assert current.outcome == "claimed" and current.lease != stale.lease

        assert self.record(job.pk, stale.lease, 0.1) == "not this attempt's"

        job.refresh_from_db()
        cpu_run.refresh_from_db()
        assert (job.state, job.lease, job.median) == (JobState.RUNNING, current.lease, None)
        assert cpu_run.evidence_level == "reported"

    def test_a_result_sent_for_another_job_changes_nothing(self, cpu_run):
        job = rerun_request(run=cpu_run)
        other_run = BenchmarkRun.objects.exclude(pk=cpu_run.pk).get()
        other = rerun_request(run=other_run)
        mine, theirs = self.claim(job), self.claim(other)

        assert self.record(other.pk, mine.lease, 0.1) == "not this attempt's"

        other.refresh_from_db()
        other_run.refresh_from_db()
        assert (other.state, other.lease, other.median) == (JobState.RUNNING, theirs.lease, None)
        assert other_run.evidence_level == "reported"

    def test_a_replayed_result_changes_nothing(self, cpu_run):
        job = rerun_request(run=cpu_run)
        claim = self.claim(job)
        assert self.record(job.pk, claim.lease, 0.1) == "succeeded"
        job.refresh_from_db()
        finished = (job.state, job.finished_at, job.median)

        # The same result again, and a different one under the same lease.
        assert self.record(job.pk, claim.lease, 0.1) == "not this attempt's"
        assert self.record(job.pk, claim.lease, 99.0) == "not this attempt's"

        job.refresh_from_db()
        assert (job.state, job.finished_at, job.median) == finished
        assert RerunJob.objects.filter(run=cpu_run).count() == 1

    def test_a_guessed_or_empty_lease_changes_nothing(self, cpu_run):
        job = rerun_request(run=cpu_run)
        self.claim(job)
        for lease in ("", "0" * 32, None):
            assert self.record(job.pk, lease, 0.1) == "not this attempt's"
        job.refresh_from_db()
        assert job.state == JobState.RUNNING


SPEC = small_geglu_spec("cpu")


class TestHarnessRunsOnlyMappedKernelsWithCheckedParameters:
    def test_the_unchanged_spec_is_accepted(self):
        assert plan_for(SPEC)["config"] == SPEC["config"]

    @pytest.mark.parametrize(
        "change",
        [
            {"kernel": "geglu; rm -rf /"},
            {"kernel": "os"},
            {"kernel": "../../etc/passwd"},
            {"provider": "$(reboot)"},
            {"provider": "liger_evil"},
            {"operation_mode": "forward && curl x"},
            {"metric": "latency;"},
            {"device": "cuda:0; sh"},
            {"x_name": "T x"},
            {"x_value": "16; sh"},
            {"x_value": float("nan")},
            {"x_value": -1},
            {"x_value": 2**41},
            {"config": "bsz=2"},
            {"config": {"bsz": "2; sh"}},
            {"config": {"bsz": {"__import__": "os"}}},
            {"config": {"bsz": [1, 2]}},
            {"config": {"dtype": "torch.load"}},
            {"config": {"a b": 1}},
            {"config": {f"k{i}": 1 for i in range(33)}},
        ],
    )
    def test_a_spec_outside_the_table_or_the_ranges_is_refused(self, change):
        with pytest.raises(Refused):
            plan_for({**SPEC, **change})

    def test_the_script_and_function_come_from_the_table_never_from_the_spec(self):
        plan = plan_for({**SPEC, "script": "os", "function": "system", "entry": "exec"})
        assert (plan["script"], plan["function"]) == (KERNELS["geglu"].script, KERNELS["geglu"].setup)

    def test_a_refused_spec_comes_back_as_a_result_without_starting_a_process(self):
        result = run_job_spec({**SPEC, "kernel": "geglu; rm -rf /"}, timeout_s=5)
        assert result["status"] == "refused"
        assert result["error"].startswith("kernel must be a name")
        assert result["log"] == ""


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@needs_redis
class TestARealWorkerRefusesForgedMessages:
    def test_a_tampered_and_an_unsigned_message_never_run_on_the_worker(self, cpu_run, tmp_path):
        broker_clear()
        job = rerun_request(run=cpu_run)
        # The real message is taken off the queue; forged ones are put in its place.
        broker_clear()
        tampered = job_message(job)
        tampered["signed"]["spec"]["config"]["hidden_size"] = 4096
        job_send(job_id=job.pk, queue="gpu.cpu", message=tampered)
        job_send(job_id=job.pk, queue="gpu.cpu", message={})
        worker = FaultWorker(tmp_path).start()
        try:
            until(lambda: worker.log().count(f"Job {job.pk} refused") >= 2, 60, "both refusals")
        finally:
            worker.stop()
            broker_clear()
        assert f"Job {job.pk} refused: the signature does not match the job spec" in worker.log()
        assert f"Job {job.pk} refused: the message carries no signed job spec" in worker.log()
        assert worker.claims(job.pk) == []
        untouched(job)
