"""The API: public lists of approved attestations; authenticated create and list-own with a
session (CSRF checked) or a per-user token; the same validation and services as the forms."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from attestations import services
from attestations.models import Attestation, IssueReport
from tests.attestations.conftest import submit_note, submit_reproduction

pytestmark = pytest.mark.django_db


def reproduction_json(run, **overrides):
    data = {
        "run": run.pk,
        "kind": "reproduction",
        "median": 145.0,
        "p20": 144.0,
        "p80": 146.0,
        "unit": "ms",
        "gpu_product": "NVIDIA A100 SXM4 80GB",
        "links": ["https://example.org/run.log"],
        "text": "Through the API.",
    }
    data.update(overrides)
    return data


@pytest.fixture
def token_client(contributor):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_regenerate(user=contributor).key}")
    return client


class TestPublicList:
    def test_lists_only_approved_attestations_of_the_run(self, client, runs, contributor, moderator):
        run = runs["reference"]
        approved = services.attestation_approve(
            attestation=submit_reproduction(run, contributor), moderator=moderator
        )
        submit_note(run, contributor)  # pending
        rejected = submit_note(run, contributor, text="rejected one")
        services.attestation_reject(attestation=rejected, moderator=moderator, reason="No.")
        services.attestation_approve(
            attestation=submit_note(runs["memory"], contributor), moderator=moderator
        )
        response = client.get(reverse("run-attestation-list", args=[run.pk]))
        assert response.status_code == 200
        body = response.json()
        assert [item["id"] for item in body["results"]] == [approved.pk]
        assert body["results"][0]["author"] == "ada"
        assert "state" not in body["results"][0] and "rejection_reason" not in body["results"][0]

    def test_unknown_run_is_404(self, client, db):
        assert client.get(reverse("run-attestation-list", args=[424242])).status_code == 404

    def test_query_count_does_not_grow_with_attestations(
        self, client, run, contributor, moderator, django_assert_max_num_queries
    ):
        for i in range(3):
            services.attestation_approve(
                attestation=submit_note(run, contributor, text=f"n{i}"), moderator=moderator
            )
        with django_assert_max_num_queries(4):
            assert client.get(reverse("run-attestation-list", args=[run.pk])).status_code == 200

    def test_stranger_cannot_fetch_a_pending_one_by_id(self, client, run, contributor, other_contributor):
        pending = submit_note(run, contributor)
        url = reverse("attestation-detail", args=[pending.pk])
        assert client.get(url).status_code == 404
        client.force_login(other_contributor)
        assert client.get(url).status_code == 404
        client.force_login(contributor)
        assert client.get(url).json()["state"] == "pending"


class TestCreateWithToken:
    def test_creates_a_pending_reproduction(self, token_client, run, contributor):
        response = token_client.post(reverse("attestation-list"), reproduction_json(run), format="json")
        assert response.status_code == 201
        assert response.json()["state"] == "pending"
        attestation = Attestation.objects.get()
        assert (attestation.author, attestation.state, attestation.links) == (
            contributor,
            "pending",
            ["https://example.org/run.log"],
        )

    def test_lists_only_ones_own_in_every_state(
        self, token_client, run, contributor, other_contributor, moderator
    ):
        mine = submit_note(run, contributor)
        services.attestation_reject(attestation=mine, moderator=moderator, reason="Too vague.")
        submit_note(run, other_contributor)
        response = token_client.get(reverse("attestation-list"))
        assert response.status_code == 200
        results = response.json()["results"]
        assert [(r["id"], r["state"], r["rejection_reason"]) for r in results] == [
            (mine.pk, "rejected", "Too vague.")
        ]

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"unit": "MB"}, "unit"),
            ({"median": -1}, "median"),
            ({"median": 0}, "median"),
            ({"p20": 150.0}, "median"),
            ({"links": ["javascript:alert(1)"]}, "links"),
            (
                {"links": ["https://a.org/1", "https://a.org/2", "https://a.org/3", "https://a.org/4"]},
                "links",
            ),
            ({"text": "x" * 5001}, "text"),
            ({"kind": "note", "text": "a note with figures"}, "median"),
            ({"gpu_product": ""}, "gpu_product"),
        ],
    )
    def test_same_validation_as_the_form(self, token_client, run, overrides, field):
        response = token_client.post(
            reverse("attestation-list"), reproduction_json(run, **overrides), format="json"
        )
        assert response.status_code == 400
        assert field in response.json()
        assert Attestation.objects.count() == 0

    @pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999"])
    def test_non_finite_numbers_are_refused(self, token_client, run, raw):
        body = (
            f'{{"run": {run.pk}, "kind": "reproduction", "median": {raw}, "p20": 1, "p80": 2, '
            '"unit": "ms", "gpu_product": "A100"}'
        )
        response = token_client.post(reverse("attestation-list"), body, content_type="application/json")
        assert response.status_code == 400
        assert Attestation.objects.count() == 0

    def test_duplicate_is_refused(self, token_client, run):
        assert (
            token_client.post(reverse("attestation-list"), reproduction_json(run), format="json").status_code
            == 201
        )
        response = token_client.post(reverse("attestation-list"), reproduction_json(run), format="json")
        assert response.status_code == 400
        assert response.json() == {"non_field_errors": ["You have already submitted exactly this."]}
        assert Attestation.objects.count() == 1

    def test_files_an_issue_report_and_lists_own(self, token_client, run, contributor, other_contributor):
        IssueReport.objects.create(
            run=run, reporter=other_contributor, category="other", description="theirs", content_digest="x"
        )
        response = token_client.post(
            reverse("issue-report-list"),
            {"run": run.pk, "category": "correctness", "description": "No reference comparator."},
            format="json",
        )
        assert response.status_code == 201
        assert response.json()["state"] == "open"
        listed = token_client.get(reverse("issue-report-list")).json()["results"]
        assert [r["description"] for r in listed] == ["No reference comparator."]

    def test_someone_elses_report_is_404(self, token_client, run, other_contributor):
        theirs = services.issue_report_create(
            run=run, reporter=other_contributor, category="other", description="x"
        )
        assert token_client.get(reverse("issue-report-detail", args=[theirs.pk])).status_code == 404

    def test_a_regenerated_token_replaces_the_old_one(self, token_client, contributor, run):
        old = Token.objects.get(user=contributor).key
        services.api_token_regenerate(user=contributor)
        assert Token.objects.get(user=contributor).key != old
        response = token_client.post(reverse("attestation-list"), reproduction_json(run), format="json")
        assert response.status_code == 403  # DRF answers 403 when session auth comes first
        assert response.json() == {"detail": "Invalid token."}
        assert Attestation.objects.count() == 0


class TestAuthentication:
    def test_visitors_cannot_create_or_list(self, client, run):
        assert client.post(
            reverse("attestation-list"), reproduction_json(run), content_type="application/json"
        ).status_code in (401, 403)
        assert client.get(reverse("attestation-list")).status_code in (401, 403)
        assert client.get(reverse("issue-report-list")).status_code in (401, 403)
        assert Attestation.objects.count() == 0

    def test_session_without_csrf_token_is_refused(self, contributor, run):
        client = Client(enforce_csrf_checks=True)
        client.force_login(contributor)
        response = client.post(
            reverse("attestation-list"), reproduction_json(run), content_type="application/json"
        )
        assert response.status_code == 403
        assert "CSRF" in response.json()["detail"]
        assert Attestation.objects.count() == 0

    def test_session_with_csrf_token_is_accepted(self, contributor, run):
        client = Client(enforce_csrf_checks=True)
        client.force_login(contributor)
        client.get(reverse("attestations:account"))  # sets the CSRF cookie
        token = client.cookies["csrftoken"].value
        response = client.post(
            reverse("attestation-list"),
            reproduction_json(run),
            content_type="application/json",
            HTTP_X_CSRFTOKEN=token,
        )
        assert response.status_code == 201
        assert Attestation.objects.count() == 1

    def test_account_page_creates_a_token(self, contributor_client, contributor):
        response = contributor_client.post(reverse("attestations:api-token-regenerate"))
        assert response.status_code == 302
        token = Token.objects.get(user=contributor)
        assert token.key in contributor_client.get(reverse("attestations:account")).content.decode()

    def test_token_page_refuses_get(self, contributor_client, contributor):
        assert contributor_client.get(reverse("attestations:api-token-regenerate")).status_code == 405
        assert not Token.objects.filter(user=contributor).exists()
