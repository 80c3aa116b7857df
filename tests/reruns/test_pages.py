"""What visitors and moderators see of controlled jobs: pages, history, API and admin."""

import pytest
from django.core.management import call_command
from django.template import Context, Template
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import job_claim, rerun_record_result, rerun_request
from tests.reruns.conftest import geglu_measure_job, harness_result

pytestmark = pytest.mark.django_db


def finished_rerun(run, median):
    job = rerun_request(run=run)
    claim = job_claim(job_id=job.pk, gpu_slug=run.environment.slug, worker_host="w")
    return rerun_record_result(job_id=job.pk, lease=claim.lease, result=harness_result(median))


class TestJobPage:
    def test_a_queued_job_page_refreshes_itself(self, client, h200_run):
        job = rerun_request(run=h200_run)
        response = client.get(reverse("jobs:detail", args=[job.pk]))
        assert response.status_code == 200
        assert response["Refresh"] == "5"
        assert b"refreshes every 5 seconds" in response.content
        assert b"gpu.nvidia-h200" in response.content

    def test_a_finished_job_page_stops_refreshing_and_shows_agreement(self, client, h200_run):
        job = finished_rerun(h200_run, 1.02)
        response = client.get(reverse("jobs:detail", args=[job.pk]))
        assert response.status_code == 200
        assert "Refresh" not in response
        assert "102.0% of the recorded median" in response.content.decode()

    def test_the_log_is_for_staff_only(self, client, h200_run, moderator):
        job = rerun_request(run=h200_run)
        claim = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="w")
        rerun_record_result(
            job_id=job.pk,
            lease=claim.lease,
            result={"status": "failed", "error": "boom", "log": "SECRET-LOG-LINE"},
        )
        assert b"SECRET-LOG-LINE" not in client.get(reverse("jobs:detail", args=[job.pk])).content
        client.force_login(moderator)
        assert b"SECRET-LOG-LINE" in client.get(reverse("jobs:detail", args=[job.pk])).content

    def test_the_job_list_filters_by_state(self, client, h200_run, far_off_cpu_run):
        finished_rerun(h200_run, 1.0)
        queued = rerun_request(run=far_off_cpu_run)
        response = client.get(reverse("jobs:list"), {"state": "queued"})
        assert response.status_code == 200
        assert [job.pk for job in response.context["page"]] == [queued.pk]


def history(run):
    """The run page's rerun history section, as the run page includes it."""
    return Template("{% load rerun_tags %}{% run_reruns run %}").render(Context({"run": run}))


class TestRerunHistory:
    def test_the_history_shows_each_rerun_with_its_result_and_agreement(self, h200_run):
        finished_rerun(h200_run, 1.3)
        finished_rerun(h200_run, 1.01)
        page = history(h200_run)
        assert "130.0% of the recorded median" in page
        assert "diverged" in page
        assert "101.0% of the recorded median" in page
        assert "95% interval" in page

    def test_the_history_takes_one_query_however_long(self, h200_run, django_assert_num_queries):
        for median in (1.3, 1.2, 1.0):
            finished_rerun(h200_run, median)
        # As the run page loads it (selectors.run_for_page): its specs come with it.
        run = BenchmarkRun.objects.select_related("kernel", "workload", "implementation", "environment").get(
            pk=h200_run.pk
        )
        with django_assert_num_queries(1):
            html = history(run)
        assert html.count('class="job-') == 3

    def test_a_measured_run_shows_the_job_that_measured_it(self, small_data):
        job = geglu_measure_job("liger", "forward", "latency")
        claim = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="w")
        run = rerun_record_result(job_id=job.pk, lease=claim.lease, result=harness_result(0.7)).result_run
        assert "measured this run" in history(run)


class TestJobsApi:
    def test_jobs_are_listed_with_their_outcome(self, client, h200_run):
        job = finished_rerun(h200_run, 1.02)
        response = client.get(reverse("job-list"), {"run": h200_run.pk})
        assert response.status_code == 200
        body = response.json()
        assert body["count"] == 1
        record = body["results"][0]
        assert (record["id"], record["state"], record["kind"]) == (job.pk, "succeeded", "rerun")
        assert record["agreement_pct"] == pytest.approx(102.0)
        assert "samples" not in record

    def test_a_job_has_its_samples_and_environment(self, client, h200_run):
        job = finished_rerun(h200_run, 1.02)
        response = client.get(reverse("job-detail", args=[job.pk]))
        assert response.status_code == 200
        assert response.json()["samples"] == job.samples
        assert response.json()["environment"]["gpu_slug"] == "nvidia-h200"

    def test_the_api_is_read_only(self, client, contributor, h200_run):
        job = rerun_request(run=h200_run)
        client.force_login(contributor)
        assert client.post(reverse("job-list"), {"run": h200_run.pk}).status_code == 405
        assert client.delete(reverse("job-detail", args=[job.pk])).status_code == 405
        assert RerunJob.objects.count() == 1


class TestAdmin:
    def test_request_rerun_asks_why_then_queues_one_job_per_run(
        self, client, moderator, h200_run, far_off_cpu_run, django_capture_on_commit_callbacks
    ):
        client.force_login(moderator)
        url = reverse("admin:registry_benchmarkrun_changelist")
        selected = {"action": "request_rerun", "_selected_action": [h200_run.pk, far_off_cpu_run.pk]}
        response = client.post(url, selected)
        assert response.status_code == 200
        assert b"Request reruns" in response.content
        assert RerunJob.objects.count() == 0

        with django_capture_on_commit_callbacks() as sent:
            response = client.post(url, {**selected, "apply": "1", "reason": "issue 12 says it is slow"})
        assert response.status_code == 302
        jobs = RerunJob.objects.order_by("gpu_slug")
        assert [(j.gpu_slug, j.requested_by, j.reason) for j in jobs] == [
            ("cpu", moderator, "issue 12 says it is slow"),
            ("nvidia-h200", moderator, "issue 12 says it is slow"),
        ]
        # One message per job; the other callbacks notify about the requests' audit entries.
        assert len([callback for callback in sent if callback.func.__name__ == "job_send"]) == 2
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == "reported"

    def test_measure_form_queues_jobs_for_the_chosen_gpu_model(
        self, client, moderator, small_data, django_capture_on_commit_callbacks
    ):
        from registry.models import Kernel

        client.force_login(moderator)
        url = reverse("admin:reruns_rerunjob_measure")
        assert client.get(url).status_code == 200
        with django_capture_on_commit_callbacks():
            response = client.post(
                url,
                {
                    "kernel": Kernel.objects.get(slug="geglu").pk,
                    "providers": ["huggingface", "liger"],
                    "operation_modes": ["full"],
                    "metrics": ["latency"],
                    "gpu_slug": "cpu",
                },
            )
        assert response.status_code == 302
        jobs = RerunJob.objects.all()
        assert [(j.kind, j.provider, j.operation_mode, j.gpu_slug) for j in jobs] == [
            ("measure", "huggingface", "full", "cpu")
        ]
        assert jobs[0].state == JobState.QUEUED

    def test_a_visitor_cannot_request_measurements(self, client, contributor):
        client.force_login(contributor)
        response = client.get(reverse("admin:reruns_rerunjob_measure"))
        assert response.status_code == 302
        assert RerunJob.objects.count() == 0


class TestCommands:
    def test_gpu_worker_command_names_the_gpu_models_queue(self, capsys):
        call_command("gpu_worker_command", gpu="nvidia-h200")
        out, err = capsys.readouterr()
        assert "celery -A kernelindex worker -Q gpu.nvidia-h200 " in out
        assert "--prefetch-multiplier 1" in out
        assert err == ""  # the test worker's key is usable

    def test_gpu_worker_command_says_when_the_worker_would_refuse_to_start(self, capsys, settings):
        settings.WORKER_KEY_FILE = ""
        call_command("gpu_worker_command", gpu="nvidia-h200")
        captured = capsys.readouterr()
        assert "celery -A kernelindex worker -Q gpu.nvidia-h200 " in captured.out
        assert captured.err.strip() == (
            "This worker will refuse to start: WORKER_NAME and WORKER_KEY_FILE must name this worker "
            "and its key (manage.py worker_key)."
        )

    def test_reconcile_jobs_reports_what_it_did(self, capsys, db):
        call_command("reconcile_jobs")
        assert "0 requeued, 0 sent again" in capsys.readouterr().out
