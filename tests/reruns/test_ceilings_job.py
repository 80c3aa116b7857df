"""A ceilings job for real, on the CPU: requested through its service, signed, claimed by the
GPU-side task, measured in a child process (a copy and a bf16 GEMM, small sizes), recorded by the
recorder as the GPU model's measured ceilings. And `manage.py measure_ceilings` on the CPU, whose
file `measured_ceilings_load` loads."""

import json

import pytest
from django.core.management import call_command

from kernelindex.celery import app as celery_app
from registry.reruns.models import JobKind, JobState, MeasuredCeiling
from registry.reruns.services import JobRefused, ceilings_request, job_message
from registry.reruns.services.measured_ceilings import measured_ceilings_load
from registry.reruns.tasks import job_execute

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_celery():
    """The recorder's task, sent by the worker task, runs in-process."""
    previous = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = True, True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


class TestCeilingsJob:
    def test_a_ceilings_job_on_cpu_records_the_measured_ceilings(
        self, eager_celery, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):
            job = ceilings_request(gpu_slug="cpu", reason="CI")
        assert (job.kind, job.state, job.kernel_id, job.workload_id) == (
            JobKind.CEILINGS,
            "queued",
            None,
            None,
        )

        outcome = job_execute.apply(args=[job.pk], kwargs=job_message(job)).get()

        job.refresh_from_db()
        assert (outcome, job.state) == ("ok", JobState.SUCCEEDED), job.error
        ceiling = MeasuredCeiling.objects.get(job=job)
        assert (ceiling.gpu_slug, job.unit) == ("cpu", "GB/s")
        assert ceiling.memory_bandwidth == pytest.approx(job.median)
        assert ceiling.memory_bandwidth_low <= ceiling.memory_bandwidth <= ceiling.memory_bandwidth_high
        assert ceiling.bf16_tflops > 0
        assert len(ceiling.document["bf16_dense"]["samples"]) == ceiling.document["sizes"]["samples"] >= 5

    def test_a_ceilings_job_past_its_time_limit_is_failed_and_marked_timed_out(
        self, eager_celery, django_capture_on_commit_callbacks, settings, monkeypatch
    ):
        # The measurement's child cannot import torch in a hundredth of a second.
        monkeypatch.setattr(settings, "JOB_HARNESS_TIMEOUT", 0.01)
        with django_capture_on_commit_callbacks(execute=False):
            job = ceilings_request(gpu_slug="cpu", reason="CI")

        job_execute.apply(args=[job.pk], kwargs=job_message(job)).get()

        job.refresh_from_db()
        assert (job.state, job.timed_out) == (JobState.FAILED, True), job.error
        assert "ran past 0 s" in job.error
        assert not MeasuredCeiling.objects.exists()

    def test_a_second_active_ceilings_job_for_one_gpu_is_refused(self, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            ceilings_request(gpu_slug="nvidia-h200")
            with pytest.raises(JobRefused, match="already has an active ceilings job"):
                ceilings_request(gpu_slug="nvidia-h200")
        assert MeasuredCeiling.objects.count() == 0


class TestMeasureCeilingsCommand:
    def test_the_command_measures_the_cpu_and_its_file_loads_once(self, tmp_path):
        call_command("measure_ceilings", "--gpu", "cpu", "--out", str(tmp_path), "--samples", "5")

        document = json.loads((tmp_path / "cpu.json").read_text())
        assert document["format"] == "kernelindex-ceilings/v1"
        assert len(document["memory_bandwidth"]["samples"]) == 5
        assert measured_ceilings_load(path=tmp_path) == 1
        assert measured_ceilings_load(path=tmp_path) == 0
        assert MeasuredCeiling.objects.get().memory_bandwidth == document["memory_bandwidth"]["median"]

    def test_the_command_refuses_a_gpu_the_host_does_not_have(self, tmp_path):
        from django.core.management.base import CommandError

        with pytest.raises(CommandError, match="not nvidia-h200|No CUDA device"):
            call_command("measure_ceilings", "--gpu", "nvidia-h200", "--out", str(tmp_path), "--samples", "3")
        assert not list(tmp_path.iterdir())


class TestCeilingsJobPages:
    def test_a_ceilings_job_has_a_page_and_an_api_entry_without_a_kernel(
        self, client, django_capture_on_commit_callbacks
    ):
        from django.urls import reverse

        with django_capture_on_commit_callbacks(execute=False):
            job = ceilings_request(gpu_slug="nvidia-h200")
        page = client.get(reverse("jobs:detail", args=[job.pk]))
        assert page.status_code == 200
        assert "device-to-device copy" in page.content.decode()
        assert client.get(reverse("jobs:list")).status_code == 200
        body = client.get(reverse("job-detail", args=[job.pk])).json()
        assert (body["kind"], body["kernel"], body["workload"]) == ("ceilings", None, None)
