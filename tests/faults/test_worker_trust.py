"""Item 13: GPU workers are less trusted than the web tier.

A worker runs only a job message that KernelIndex signed (HMAC-SHA256 over the job id, the GPU
model and the spec, under JOB_SIGNING_KEY); a result counts only for the job and the attempt
(lease) that claimed it; the harness runs only mapped kernels with checked parameters."""

import base64
import copy
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from registry.models import BenchmarkRun, Workload
from registry.reruns import tasks
from registry.reruns.harness import KERNELS, run_job_spec
from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import (
    Claim,
    SignatureRefused,
    grant_check,
    job_message,
    job_send,
    rerun_request,
    worker_claim,
    worker_heartbeat,
    worker_key_register,
    worker_key_revoke,
    worker_report,
)
from registry.reruns.services.signing import private_key_generate, web_sign
from tests.faults.support import needs_redis, small_cpu_rows
from tests.faults.workers import FaultWorker, until
from tests.reruns.conftest import TEST_WORKER, csv_import, harness_result, small_geglu_spec
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
        assert len(base64.b64decode(message["signature"])) == 64  # Ed25519
        assert message["signed"]["spec"]["kernel"] == "geglu"


class TestResultsBoundToTheAttempt:
    def claim(self, job: RerunJob):
        grant = grant_check(
            worker_claim(worker_report("claim", job=job.pk, card="")), job_id=job.pk, worker=TEST_WORKER
        )
        return Claim(grant["outcome"], lease=grant["lease"])

    def record(self, job_id: int, lease: str, median: float) -> str:
        result = harness_result(median, gpu_slug="cpu")
        return tasks.job_report.apply(
            args=[worker_report("result", job=job_id, lease=lease, result=result)]
        ).get()

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
        report = worker_report(
            "result", job=job.pk, lease=claim.lease, result=harness_result(0.1, gpu_slug="cpu")
        )
        assert tasks.job_report.apply(args=[report]).get() == "succeeded"
        job.refresh_from_db()
        finished = (job.state, job.finished_at, job.median)

        # The very same signed report again, and a different result under the same lease.
        assert tasks.job_report.apply(args=[report]).get() == "not this attempt's"
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


# --- issue 36, finding 2: a worker's reports are signed with its own registered key ---------------

CARD = "GPU-5e1f0c2a-0000-4000-8000-000000000001"
OTHER_CARD = "GPU-0bad0bad-0000-4000-8000-000000000002"


@pytest.fixture
def keys(tmp_path):
    """Make a worker key (registered, unless told) and sign reports with it: `keys.make(...)`."""

    class Keys:
        def make(self, name, gpu_slug="nvidia-h200", cards=(CARD,), register=True):
            pem, public = private_key_generate()
            path = tmp_path / f"{name}.key"
            path.write_bytes(pem)
            if register:
                worker_key_register(name=name, gpu_slug=gpu_slug, public_key=public, cards=list(cards))
            return name, str(path)

        def report(self, worker, kind, **fields):
            name, path = worker
            with override_settings(WORKER_NAME=name, WORKER_KEY_FILE=path):
                return worker_report(kind, **fields)

        def claim(self, worker, job, card=CARD):
            return worker_claim(self.report(worker, "claim", job=job.pk, card=card))

        def lease(self, worker, job, card=CARD) -> str:
            grant = grant_check(self.claim(worker, job, card), job_id=job.pk, worker=worker[0])
            assert grant["outcome"] == "claimed", grant
            return grant["lease"]

        def record(self, worker, job, lease, card=CARD, median=1.0) -> str:
            result = harness_result(median, gpu_uuid=card)
            report = self.report(worker, "result", job=job.pk, lease=lease, result=result)
            return tasks.job_report.apply(args=[report]).get()

    return Keys()


def unchanged(job: RerunJob, run: BenchmarkRun, state=JobState.RUNNING) -> None:
    job.refresh_from_db()
    run.refresh_from_db()
    assert (job.state, job.median, job.verdict) == (state, None, "")
    assert run.evidence_level == "reported"


class TestSignedReports:
    def test_the_finding_an_unsigned_result_for_a_running_job_is_refused(self, h200_run, keys):
        """What the attack sent: `registry.job_record` with an invented result for the attempt."""
        job = rerun_request(run=h200_run)
        lease = keys.lease(keys.make("h200-a"), job)
        result = harness_result(1.0, gpu_uuid=CARD)
        assert tasks.job_record.apply(args=[job.pk, lease, result]).get() == "refused: unsigned"
        unchanged(job, h200_run)

    def test_a_signed_result_is_recorded(self, h200_run, keys):
        worker = keys.make("h200-a")
        job = rerun_request(run=h200_run)
        assert keys.record(worker, job, keys.lease(worker, job)) == "succeeded"
        job.refresh_from_db()
        h200_run.refresh_from_db()
        assert (job.worker_host, job.gpu_uuid, job.verdict) == ("h200-a", CARD, "agrees")
        assert h200_run.evidence_level == "reproduced"

    def test_a_result_signed_by_an_unregistered_key_is_refused(self, h200_run, keys):
        job = rerun_request(run=h200_run)
        lease = keys.lease(keys.make("h200-a"), job)
        stranger = keys.make("h200-a", register=False)  # the same name, another key
        assert keys.record(stranger, job, lease) == "not this attempt's"
        unchanged(job, h200_run)

    def test_a_result_signed_by_a_revoked_key_is_refused(self, h200_run, keys):
        worker = keys.make("h200-a")
        job = rerun_request(run=h200_run)
        lease = keys.lease(worker, job)
        assert worker_key_revoke(name="h200-a")
        assert keys.record(worker, job, lease) == "not this attempt's"
        unchanged(job, h200_run)

    def test_a_worker_of_another_gpu_model_can_neither_claim_nor_record(self, h200_run, keys):
        a100 = keys.make("a100-a", gpu_slug="nvidia-a100-sxm4-80gb")
        job = rerun_request(run=h200_run)
        grant = grant_check(keys.claim(a100, job), job_id=job.pk, worker="a100-a")
        assert (grant["outcome"], grant["lease"]) == ("wrong_gpu", "")
        unchanged(job, h200_run, state=JobState.QUEUED)

        lease = keys.lease(keys.make("h200-a"), job)
        assert keys.record(a100, job, lease) == "not this attempt's"  # granted to h200-a
        # Even an attempt made out to it (as if the claim had let it through) takes nothing from it.
        RerunJob.objects.filter(pk=job.pk).update(worker_host="a100-a")
        assert keys.record(a100, job, lease) == "not this attempt's"
        unchanged(job, h200_run)

    def test_a_card_not_registered_for_the_key_is_refused_at_the_claim_and_the_result(self, h200_run, keys):
        worker = keys.make("h200-a", cards=(CARD,))
        job = rerun_request(run=h200_run)
        refused = keys.claim(worker, job, card=OTHER_CARD)
        assert "is not registered for worker key" in refused["refused"]
        unchanged(job, h200_run, state=JobState.QUEUED)

        lease = keys.lease(worker, job, card=CARD)
        assert keys.record(worker, job, lease, card=OTHER_CARD) == "not this attempt's"
        unchanged(job, h200_run)
        assert keys.record(worker, job, lease, card=CARD) == "succeeded"

    def test_a_tampered_report_is_refused(self, h200_run, keys):
        worker = keys.make("h200-a")
        job = rerun_request(run=h200_run)
        lease = keys.lease(worker, job)
        report = keys.report(
            worker, "result", job=job.pk, lease=lease, result=harness_result(5.0, gpu_uuid=CARD)
        )
        report["body"] = report["body"].replace('"median": 5.0', '"median": 1.0')
        assert '"median": 1.0' in report["body"]
        assert tasks.job_report.apply(args=[report]).get() == "not this attempt's"
        unchanged(job, h200_run)

    def test_a_heartbeat_counts_only_from_the_worker_granted_the_attempt(self, h200_run, keys):
        worker, other = keys.make("h200-a"), keys.make("h200-b", cards=(OTHER_CARD,))
        job = rerun_request(run=h200_run)
        lease = keys.lease(worker, job)
        assert not worker_heartbeat(keys.report(other, "heartbeat", job=job.pk, lease=lease))
        assert worker_heartbeat(keys.report(worker, "heartbeat", job=job.pk, lease=lease))

    def test_an_old_claim_replayed_is_refused(self, h200_run, keys, settings):
        worker = keys.make("h200-a")
        job = rerun_request(run=h200_run)
        settings.JOB_CLAIM_WAIT = -1  # every claim is older than the wait
        assert "gave up waiting" in keys.claim(worker, job)["refused"]
        unchanged(job, h200_run, state=JobState.QUEUED)

    def test_a_worker_takes_no_grant_the_web_tier_did_not_sign(self, h200_run, keys):
        worker = keys.make("h200-a")
        job = rerun_request(run=h200_run)
        with override_settings(JOB_SIGNING_KEY="an-attacker-s-key-of-at-least-32-chars"):
            forged = web_sign({"job": job.pk, "worker": "h200-a", "outcome": "claimed", "lease": "x" * 32})
        with pytest.raises(SignatureRefused):
            grant_check(forged, job_id=job.pk, worker="h200-a")
        with pytest.raises(SignatureRefused):  # signed, but for another worker
            grant_check(keys.claim(worker, job), job_id=job.pk, worker="h200-b")
