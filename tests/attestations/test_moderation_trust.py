"""Moderators who cannot judge themselves, and an admin whose every change is audited (issue 36,
finding 5 and the import add page of finding 4): nobody decides their own submission, superusers
included; published context (ceilings, sources and their licences, imports) is read-only in the
admin; Kernel edits, cancelled jobs and every request for GPU time record their actor."""

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from attestations import services
from attestations.models import Attestation, AuditEntry, IssueReport
from registry.cache import generation as generation_current
from registry.models import Kernel, Source, SourceImport
from registry.reruns.models import JobState, MeasuredCeiling, RerunJob
from registry.reruns.services import rerun_request
from tests.attestations.conftest import submit_reproduction

pytestmark = pytest.mark.django_db


def changelist(model: str, app: str = "attestations") -> str:
    return reverse(f"admin:{app}_{model}_changelist")


def report_of(run, user) -> IssueReport:
    return services.issue_report_create(
        run=run, reporter=user, category="wrong_value", description="Off by 2x."
    )


class TestNobodyDecidesTheirOwnSubmission:
    def test_a_moderator_cannot_approve_their_own_reproduction(self, run, moderator):
        own = submit_reproduction(run, moderator)

        with pytest.raises(PermissionDenied, match="own"):
            services.attestation_approve(attestation=own, moderator=moderator)

        own.refresh_from_db()
        assert own.state == Attestation.State.PENDING

    def test_nor_reject_it(self, run, moderator):
        own = submit_reproduction(run, moderator)
        with pytest.raises(PermissionDenied):
            services.attestation_reject(attestation=own, moderator=moderator, reason="mine")

    def test_a_superuser_neither(self, run, superuser):
        own = submit_reproduction(run, superuser)
        with pytest.raises(PermissionDenied):
            services.attestation_approve(attestation=own, moderator=superuser)

    def test_nor_triage_their_own_issue_report(self, run, moderator):
        report = report_of(run, moderator)
        with pytest.raises(PermissionDenied):
            services.issue_report_transition(report=report, moderator=moderator, to_state="acknowledged")

    def test_the_admin_action_says_so_and_decides_nothing(self, client, run, superuser, contributor):
        own, theirs = submit_reproduction(run, superuser), submit_reproduction(run, contributor)
        client.force_login(superuser)

        response = client.post(
            changelist("attestation"),
            {
                "action": "approve_selected",
                "_selected_action": [own.pk, theirs.pk],
                "apply": "1",
                "reason": "",
            },
            follow=True,
        )

        assert response.status_code == 200
        assert b"own submission" in response.content
        assert dict(Attestation.objects.values_list("pk", "state")) == {
            own.pk: "pending",
            theirs.pk: "approved",
        }

    def test_another_moderator_may(self, run, moderator, superuser):
        own = submit_reproduction(run, moderator)
        services.attestation_approve(attestation=own, moderator=superuser)
        own.refresh_from_db()
        assert own.state == Attestation.State.APPROVED


class TestPublishedContextIsReadOnlyInTheAdmin:
    def test_there_is_no_add_page_for_imports(self, client, runs, superuser):
        client.force_login(superuser)
        url = reverse("admin:registry_sourceimport_add")

        assert client.get(url).status_code == 403
        assert client.post(url, {"filename": "x.csv", "rows": 1}).status_code == 403
        assert SourceImport.objects.count() == 1

    def test_a_sources_licence_cannot_be_edited(self, client, runs, superuser):
        source = Source.objects.get()
        client.force_login(superuser)

        response = client.post(
            reverse("admin:registry_source_change", args=[source.pk]),
            {"name": source.name, "slug": source.slug, "license": "Proprietary", "url": source.url},
        )

        assert response.status_code == 403
        source.refresh_from_db()
        assert source.license == "BSD-2-Clause"

    def test_a_measured_ceiling_cannot_be_deleted(self, client, superuser):
        ceiling = MeasuredCeiling.objects.create(
            gpu_slug="nvidia-h200",
            measured_at=timezone.now(),
            memory_bandwidth=4000.0,
            bf16_tflops=700.0,
            document={},
        )
        client.force_login(superuser)

        response = client.post(
            reverse("admin:reruns_measuredceiling_delete", args=[ceiling.pk]), {"post": "yes"}
        )

        assert response.status_code == 403
        assert MeasuredCeiling.objects.filter(pk=ceiling.pk).exists()


class TestEveryAdminActionRecordsItsActor:
    def test_a_kernel_edit_is_audited_and_bumps_the_page_cache(self, client, runs, superuser):
        kernel = Kernel.objects.get()
        generation = generation_current()
        client.force_login(superuser)

        response = client.post(
            reverse("admin:registry_kernel_change", args=[kernel.pk]),
            {"name": "GeGLU (gated GELU) MLP", "slug": kernel.slug, "description": kernel.description},
        )

        assert response.status_code == 302, response.content.decode()[-1500:]
        entry = AuditEntry.objects.for_object(kernel).get()
        assert (entry.actor, entry.action) == (superuser, "edited")
        assert entry.reason == "Changed in the admin: name"
        assert generation_current() != generation

    def test_cancelling_jobs_is_audited(self, client, run, moderator):
        job = rerun_request(run=run, requested_by=moderator, reason="check")
        client.force_login(moderator)

        client.post(
            reverse("admin:reruns_rerunjob_changelist"),
            {"action": "cancel_jobs", "_selected_action": [job.pk]},
        )

        job.refresh_from_db()
        assert job.state == JobState.CANCELLED
        entry = AuditEntry.objects.for_object(job).get(action="cancelled")
        assert (entry.actor, entry.from_state, entry.to_state) == (moderator, "queued", "cancelled")

    def test_a_rerun_requested_from_an_issue_report_is_audited_on_the_job_and_the_report(
        self, client, run, contributor, moderator
    ):
        report = report_of(run, contributor)
        client.force_login(moderator)

        client.post(
            reverse("admin:registry_benchmarkrun_changelist"),
            {
                "action": "request_rerun",
                "_selected_action": [run.pk],
                "apply": "1",
                "reason": "Reported off",
                "issue_report_pk": report.pk,
            },
        )

        job = RerunJob.objects.get()
        assert AuditEntry.objects.for_object(job).get().actor == moderator
        on_report = AuditEntry.objects.for_object(report).get(action="rerun_requested")
        assert on_report.actor == moderator and f"#{job.pk}" in on_report.reason
