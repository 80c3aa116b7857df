"""Contributors file reproductions and notes through the run's form; they wait for moderation."""

import pytest
from django.urls import reverse

from attestations.models import Attestation, AuditEntry
from tests.attestations.conftest import submit_note, submit_reproduction

pytestmark = pytest.mark.django_db


class TestVisitor:
    def test_visitor_is_sent_to_log_in_and_back(self, client, run):
        url = reverse("attestations:attestation-create", args=[run.pk])
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('account_login')}?next={url}"

    def test_visitor_cannot_post(self, client, run, reproduction_data):
        response = client.post(reverse("attestations:attestation-create", args=[run.pk]), reproduction_data)
        assert response.status_code == 302
        assert Attestation.objects.count() == 0

    def test_login_brings_the_visitor_back_to_the_form(self, client, run, contributor):
        url = reverse("attestations:attestation-create", args=[run.pk])
        response = client.post(
            f"{reverse('account_login')}?next={url}",
            {"login": "ada", "password": "correct-horse-battery-staple-42", "next": url},
        )
        assert response.status_code == 302
        assert response["Location"] == url
        assert client.get(url).status_code == 200


class TestContributorSubmits:
    def test_form_is_prefilled_with_the_runs_unit_and_gpu(self, contributor_client, run):
        response = contributor_client.get(reverse("attestations:attestation-create", args=[run.pk]))
        assert response.status_code == 200
        form = response.context["form"]
        assert form["unit"].value() == "ms"
        assert form["gpu_product"].value() == "NVIDIA A100 SXM4 80GB"
        assert b"csrfmiddlewaretoken" in response.content

    def test_reproduction_is_filed_pending(self, contributor_client, contributor, run, reproduction_data):
        response = contributor_client.post(
            reverse("attestations:attestation-create", args=[run.pk]), reproduction_data
        )
        assert response.status_code == 302
        assert response["Location"] == reverse("attestations:my-submissions")
        attestation = Attestation.objects.get()
        assert attestation.state == Attestation.State.PENDING
        assert (attestation.author, attestation.run, attestation.kind) == (contributor, run, "reproduction")
        assert (attestation.p20, attestation.median, attestation.p80) == (144.1, 145.0, 146.3)
        assert attestation.links == ["https://example.org/log.txt"]
        assert attestation.torch_version == "2.4.0"
        entry = AuditEntry.objects.get()
        assert (entry.actor, entry.action, entry.from_state, entry.to_state) == (
            contributor,
            "submitted",
            "",
            "pending",
        )

    def test_note_carries_only_its_text_even_with_the_prefilled_fields(
        self, contributor_client, run, reproduction_data
    ):
        reproduction_data.update(kind="note", text="Timed with CUDA events.")
        response = contributor_client.post(
            reverse("attestations:attestation-create", args=[run.pk]), reproduction_data
        )
        assert response.status_code == 302
        note = Attestation.objects.get()
        assert (note.kind, note.text, note.median, note.unit, note.links) == (
            "note",
            "Timed with CUDA events.",
            None,
            "",
            [],
        )

    def test_note_without_text_is_refused(self, contributor_client, run):
        response = contributor_client.post(
            reverse("attestations:attestation-create", args=[run.pk]), {"kind": "note", "text": "  "}
        )
        assert response.status_code == 200
        assert response.context["form"].errors["text"] == ["A note needs some text."]
        assert Attestation.objects.count() == 0

    def test_same_content_twice_is_refused(self, contributor_client, run, reproduction_data):
        url = reverse("attestations:attestation-create", args=[run.pk])
        assert contributor_client.post(url, reproduction_data).status_code == 302
        reproduction_data["text"] += "  "  # whitespace does not make it new
        response = contributor_client.post(url, reproduction_data)
        assert response.status_code == 200
        assert response.context["form"].non_field_errors() == ["You have already submitted exactly this."]
        assert Attestation.objects.count() == 1

    def test_another_contributor_may_file_the_same_content(self, run, contributor, other_contributor):
        submit_reproduction(run, contributor)
        submit_reproduction(run, other_contributor)
        assert Attestation.objects.count() == 2

    def test_unknown_run_is_404(self, contributor_client):
        response = contributor_client.get(reverse("attestations:attestation-create", args=[999999]))
        assert response.status_code == 404


class TestMySubmissions:
    def test_author_sees_own_pending_and_rejected_with_reason(
        self, contributor_client, contributor, run, moderator
    ):
        from attestations import services

        pending = submit_reproduction(run, contributor)
        rejected = submit_note(run, contributor)
        services.attestation_reject(
            attestation=rejected, moderator=moderator, reason="Off topic for this run."
        )
        response = contributor_client.get(reverse("attestations:my-submissions"))
        assert response.status_code == 200
        body = response.content.decode()
        assert f'id="attestation-{pending.pk}"' in body
        assert "Pending moderation" in body
        assert "Off topic for this run." in body

    def test_page_shows_nobody_elses_submissions(self, contributor_client, other_contributor, run):
        theirs = submit_note(run, other_contributor, text="Someone else's note")
        response = contributor_client.get(reverse("attestations:my-submissions"))
        assert response.status_code == 200
        assert f'id="attestation-{theirs.pk}"' not in response.content.decode()

    def test_page_has_a_constant_number_of_queries(
        self, contributor_client, contributor, run, runs, django_assert_max_num_queries
    ):
        submit_reproduction(run, contributor)
        submit_note(runs["memory"], contributor)
        with django_assert_max_num_queries(6) as few:
            contributor_client.get(reverse("attestations:my-submissions"))
        for i in range(5):
            submit_note(run, contributor, text=f"note {i}")
        with django_assert_max_num_queries(len(few.captured_queries)):
            contributor_client.get(reverse("attestations:my-submissions"))

    def test_visitor_is_sent_to_log_in(self, client):
        response = client.get(reverse("attestations:my-submissions"))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("account_login"))


class TestAttestationDetail:
    def test_stranger_cannot_see_a_pending_attestation(self, client, other_contributor, contributor, run):
        pending = submit_reproduction(run, contributor)
        url = reverse("attestations:attestation-detail", args=[pending.pk])
        assert client.get(url).status_code == 404
        client.force_login(other_contributor)
        assert client.get(url).status_code == 404

    def test_author_and_moderator_see_a_pending_attestation(self, client, contributor, moderator, run):
        pending = submit_reproduction(run, contributor)
        url = reverse("attestations:attestation-detail", args=[pending.pk])
        client.force_login(contributor)
        assert client.get(url).status_code == 200
        client.force_login(moderator)
        assert client.get(url).status_code == 200

    def test_everyone_sees_an_approved_attestation(self, client, contributor, moderator, run):
        from attestations import services

        attestation = services.attestation_approve(
            attestation=submit_reproduction(run, contributor), moderator=moderator
        )
        response = client.get(reverse("attestations:attestation-detail", args=[attestation.pk]))
        assert response.status_code == 200
        assert b"145" in response.content
