"""No role writes an evidence level over HTTP: not the admin's forms or actions (a superuser's
included), not the API, not attestations. Only the worker path, `rerun_record_result`, does."""

import pytest
from django.urls import reverse

from attestations.models import Attestation
from registry.models import BenchmarkRun, EvidenceLevel
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import job_claim, rerun_record_result, rerun_request
from tests.reruns.conftest import harness_result
from tests.security.conftest import ROLES

pytestmark = pytest.mark.django_db

FORGED = {"evidence_level": EvidenceLevel.REPRODUCED}


def change_form_data(response) -> dict:
    """What the browser would post back from an admin change page, unchanged."""
    form = response.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = field.prepare_value(form[name].value())
        if hasattr(field.widget, "decompress"):  # split date and time
            for index, part in enumerate(field.widget.decompress(value)):
                data[f"{name}_{index}"] = "" if part is None else part
            continue
        if value is None:
            value = ""
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = value
    return data


def assert_level_untouched(run):
    run.refresh_from_db()
    assert run.evidence_level == EvidenceLevel.REPORTED
    assert not BenchmarkRun.objects.exclude(evidence_level=EvidenceLevel.REPORTED).exists()


class TestTheAdminCannotWriteIt:
    def test_a_superusers_change_form_is_read_only_and_a_forged_post_changes_nothing(
        self, client, superuser, world
    ):
        client.force_login(superuser)
        url = reverse("admin:registry_benchmarkrun_change", args=[world.run.pk])
        page = client.get(url)
        assert page.status_code == 200
        assert "evidence_level" not in change_form_data(page)  # not even a field of the form
        note = world.run.correctness_note
        response = client.post(url, {**FORGED, "correctness_note": "checked by hand"})
        assert response.status_code == 403
        world.run.refresh_from_db()
        assert world.run.correctness_note == note  # a published record is not edited by hand
        assert_level_untouched(world.run)

    def test_a_superusers_add_form_cannot_create_a_reproduced_run(self, client, superuser, world):
        client.force_login(superuser)
        before = BenchmarkRun.objects.count()
        client.post(reverse("admin:registry_benchmarkrun_add"), {**FORGED, "median": "1"})
        assert BenchmarkRun.objects.count() == before
        assert_level_untouched(world.run)

    def test_the_rerun_action_only_queues_a_job(self, client, superuser, world):
        client.force_login(superuser)
        RerunJob.objects.update(state=JobState.CANCELLED)
        response = client.post(
            reverse("admin:registry_benchmarkrun_changelist"),
            {"action": "request_rerun", "_selected_action": [world.run.pk], "apply": "1", **FORGED},
        )
        assert response.status_code == 302
        assert RerunJob.objects.filter(run=world.run, state=JobState.QUEUED).count() == 1
        assert_level_untouched(world.run)

    def test_the_job_admin_cannot_change_a_job(self, client, superuser, world):
        client.force_login(superuser)
        url = reverse("admin:reruns_rerunjob_change", args=[world.job.pk])
        client.post(url, {"state": JobState.SUCCEEDED, "median": "1.0", **FORGED})
        world.job.refresh_from_db()
        assert world.job.state == JobState.QUEUED
        assert_level_untouched(world.run)

    def test_a_moderator_cannot_open_the_runs_change_form(self, world):
        client = world.client("moderator")
        url = reverse("admin:registry_benchmarkrun_change", args=[world.run.pk])
        assert client.post(url, FORGED).status_code == 403
        assert_level_untouched(world.run)


class TestTheApiCannotWriteIt:
    def test_no_role_writes_a_run_with_any_unsafe_method(self, world):
        urls = [
            reverse("run-detail", args=[world.run.pk]),
            reverse("run-list"),
            reverse("run-manifest", args=[world.run.pk]),
        ]
        refused = set()
        for role in ROLES:
            client = world.client(role)
            for method in ("post", "put", "patch", "delete"):
                for url in urls:
                    response = getattr(client, method)(url, FORGED, content_type="application/json")
                    refused.add(response.status_code)
        assert refused <= {401, 403, 405}
        assert_level_untouched(world.run)

    def test_no_role_writes_a_job(self, world):
        url = reverse("job-detail", args=[world.job.pk])
        for role in ROLES:
            response = world.client(role).patch(
                url, {"state": "succeeded", **FORGED}, content_type="application/json"
            )
            assert response.status_code in (401, 403, 405), role
        world.job.refresh_from_db()
        assert world.job.state == JobState.QUEUED


class TestAttestationsCannotWriteIt:
    def test_an_agreeing_reproduction_with_a_forged_level_is_filed_and_changes_nothing(self, world):
        client = world.client("other")
        payload = {
            "run": world.run.pk,
            "kind": "reproduction",
            "median": world.run.median,
            "p20": world.run.p20,
            "p80": world.run.p80,
            "unit": world.run.unit,
            "gpu_product": world.run.environment.product,
            **FORGED,
        }
        response = client.post(reverse("attestation-list"), payload, content_type="application/json")
        assert response.status_code == 201
        attestation = Attestation.objects.get(pk=response.json()["id"])
        client = world.client("moderator")
        decide = reverse("admin:attestations_attestation_decide", args=[attestation.pk, "approve"])
        assert client.post(decide, {"reason": "", **FORGED}).status_code == 302
        attestation.refresh_from_db()
        assert attestation.state == "approved"
        assert_level_untouched(world.run)

    def test_the_form_ignores_a_forged_level(self, world):
        client = world.client("other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        response = client.post(url, {"kind": "note", "text": "Same here.", **FORGED})
        assert response.status_code == 302
        assert_level_untouched(world.run)


class TestTheWorkersCredentialWritesNothing:
    def test_a_valid_attestation_from_the_worker_token_is_refused(self, world):
        client = world.client("worker")
        before = Attestation.objects.count()
        response = client.post(
            reverse("attestation-list"),
            {"run": world.run.pk, "kind": "note", "text": "I am a GPU."},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert Attestation.objects.count() == before

    def test_a_valid_issue_report_from_the_worker_token_is_refused(self, world):
        client = world.client("worker")
        response = client.post(
            reverse("issue-report-list"),
            {"run": world.run.pk, "category": "other", "description": "Please rerun me."},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert world.run.issue_reports.count() == 1  # the owner's, from the fixture

    @pytest.mark.parametrize("credential", ["inactive user", "deleted token"])
    def test_a_revoked_credential_is_refused_even_for_reads(self, world, credential):
        client = world.client("revoked")
        if credential == "deleted token":
            token = world.users["owner"].auth_token
            key = token.key
            token.delete()
            client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
        response = client.post(
            reverse("attestation-list"),
            {"run": world.run.pk, "kind": "note", "text": "Still here."},
            content_type="application/json",
        )
        assert response.status_code in (401, 403)
        assert client.get(reverse("run-list")).status_code in (401, 403)
        assert not Attestation.objects.filter(text="Still here.").exists()


class TestOnlyTheWorkerPathWritesIt:
    def test_rerun_record_result_is_what_makes_a_run_reproduced(self, world):
        RerunJob.objects.update(state=JobState.CANCELLED)
        run = world.memory_run
        job = rerun_request(run=run)
        claim = job_claim(job_id=job.pk, gpu_slug=run.environment.slug, worker_host="gpu-1")
        rerun_record_result(
            job_id=job.pk,
            lease=claim.lease,
            result=harness_result(
                run.median, p20=run.p20, p80=run.p80, gpu_slug=run.environment.slug, unit=run.unit
            ),
        )
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPRODUCED
