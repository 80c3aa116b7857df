"""Hostile input: script payloads are shown escaped everywhere, links only http(s) with
rel="nofollow ugc noopener", bad numbers and units refused, oversize text refused, floods
stopped by per-user and per-IP limits, other users' objects out of reach."""

import pytest
from django.urls import reverse

from attestations import services
from attestations.models import Attestation, IssueReport
from tests.attestations.conftest import submit_note, submit_reproduction

pytestmark = pytest.mark.django_db

SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def post_attestation(client, run, data):
    return client.post(reverse("attestations:attestation-create", args=[run.pk]), data)


class TestEscaping:
    @pytest.fixture
    def hostile(self, run, contributor, moderator):
        attestation = submit_reproduction(
            run,
            contributor,
            gpu_product=SCRIPT[:100],
            harness=SCRIPT,
            text=SCRIPT,
            links=['https://example.org/"><script>alert(2)</script>'],
        )
        return services.attestation_approve(attestation=attestation, moderator=moderator)

    @pytest.mark.parametrize(
        "page",
        ["run_attestations", "detail", "my_submissions", "admin_change", "admin_list"],
    )
    def test_script_payloads_are_escaped(self, client, hostile, contributor, moderator, page):
        client.force_login(moderator if page.startswith("admin") else contributor)
        url = {
            "run_attestations": reverse("attestations:run-attestations", args=[hostile.run_id]),
            "detail": reverse("attestations:attestation-detail", args=[hostile.pk]),
            "my_submissions": reverse("attestations:my-submissions"),
            "admin_change": reverse("admin:attestations_attestation_change", args=[hostile.pk]),
            "admin_list": reverse("admin:attestations_attestation_changelist") + "?state=all",
        }[page]
        response = client.get(url)
        assert response.status_code == 200
        body = response.content.decode()
        assert "<script>alert" not in body
        assert "<img src=x" not in body

    def test_links_are_nofollow_ugc_noopener_and_escaped(self, client, hostile):
        body = client.get(reverse("attestations:run-attestations", args=[hostile.run_id])).content.decode()
        assert (
            '<a href="https://example.org/&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;" '
            'rel="nofollow ugc noopener">'
        ) in body

    def test_report_description_is_escaped(self, contributor_client, run, contributor):
        report = services.issue_report_create(
            run=run, reporter=contributor, category="other", description=SCRIPT
        )
        body = contributor_client.get(
            reverse("attestations:report-detail", args=[report.pk])
        ).content.decode()
        assert "<script>alert" not in body
        assert "&lt;script&gt;" in body

    def test_moderator_email_carries_no_user_text_in_the_subject(
        self, run, contributor, moderator, mailoutbox, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            submit_note(run, contributor, text="Subject: spam\nBcc: everyone@example.org")
        assert [m.subject for m in mailoutbox] == ["[KernelIndex] New note to moderate"]
        assert mailoutbox[0].bcc == []


class TestRefusedInput:
    @pytest.mark.parametrize(
        ("overrides", "field", "message"),
        [
            ({"median": "nan"}, "median", "Enter a number."),
            ({"median": "inf"}, "median", "Enter a number."),
            ({"median": "-145"}, "median", "Enter a finite number greater than zero."),
            ({"median": "0"}, "median", "Enter a finite number greater than zero."),
            ({"median": "1e400"}, "median", "Enter a number."),
            ({"median": "abc"}, "median", "Enter a number."),
            ({"median": ""}, "median", "Required for a reproduction."),
            ({"p20": "150"}, "median", "The figures must satisfy p20 ≤ median ≤ p80"),
            ({"p80": "140"}, "median", "The figures must satisfy p20 ≤ median ≤ p80"),
            ({"unit": "MB"}, "unit", 'This run measures latency in "ms"'),
            ({"unit": "s"}, "unit", 'give the figures in "ms"'),
            ({"links": "javascript:alert(1)"}, "links", "Enter a full http:// or https:// link."),
            ({"links": "ftp://example.org/x"}, "links", "Enter a full http:// or https:// link."),
            ({"links": "data:text/html,<script>alert(1)</script>"}, "links", "Enter a full http"),
            (
                {"links": "https://a.org/1\nhttps://a.org/2\nhttps://a.org/3\nhttps://a.org/4"},
                "links",
                "At most 3 links.",
            ),
            ({"links": "https://example.org/" + "a" * 500}, "links", "At most 500 characters"),
            ({"text": "x" * 5001}, "text", "at most 5000 characters"),
            ({"harness": "x" * 301}, "harness", "at most 300 characters"),
            ({"torch_version": "2" * 51}, "torch_version", "at most 50 characters"),
            ({"text": "nul\x00byte"}, "text", "Null characters are not allowed."),
            ({"gpu_product": ""}, "gpu_product", "Name the GPU you ran on."),
            ({"kind": "verdict"}, "kind", "Select a valid choice."),
        ],
    )
    def test_form_refuses_with_a_clear_message(
        self, contributor_client, run, reproduction_data, overrides, field, message
    ):
        response = post_attestation(contributor_client, run, {**reproduction_data, **overrides})
        assert response.status_code == 200
        errors = response.context["form"].errors[field]
        assert any(message.lower() in error.lower() for error in errors), errors
        assert Attestation.objects.count() == 0

    def test_memory_run_wants_megabytes(self, contributor_client, runs, reproduction_data):
        memory = runs["memory"]
        data = {**reproduction_data, "median": "12212", "p20": "12212", "p80": "12212"}
        response = post_attestation(contributor_client, memory, data)  # unit "ms"
        assert 'This run measures peak memory in "MB"' in response.context["form"].errors["unit"][0]
        response = post_attestation(contributor_client, memory, {**data, "unit": "MB"})
        assert response.status_code == 302
        assert Attestation.objects.get().unit == "MB"

    def test_equal_percentiles_are_fine(self, contributor_client, run, reproduction_data):
        data = {**reproduction_data, "median": "144.2", "p20": "144.2", "p80": "144.2"}
        assert post_attestation(contributor_client, run, data).status_code == 302

    def test_post_without_csrf_token_is_refused(self, contributor, run, reproduction_data):
        from django.test import Client

        client = Client(enforce_csrf_checks=True)
        client.force_login(contributor)
        assert post_attestation(client, run, reproduction_data).status_code == 403
        response = client.post(
            reverse("attestations:report-create", args=[run.pk]), {"category": "other", "description": "x"}
        )
        assert response.status_code == 403
        assert Attestation.objects.count() == IssueReport.objects.count() == 0

    def test_service_refuses_what_the_form_would_not_send(self, run, contributor):
        from django.core.exceptions import ValidationError

        with pytest.raises(ValidationError) as caught:
            services.attestation_submit(
                run=run,
                author=contributor,
                kind="reproduction",
                median=float("nan"),
                p20=True,
                p80=[1],
                unit="ms",
                gpu_product="A100",
                links="https://example.org",  # a string, not a list
            )
        assert set(caught.value.message_dict) == {"median", "p20", "p80", "links"}
        assert Attestation.objects.count() == 0


class TestRateLimits:
    def test_per_user_limit_with_a_clear_message(self, settings, contributor_client, run, reproduction_data):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "2/h", "ip": "100/h"}
        for i in range(2):
            assert (
                post_attestation(
                    contributor_client, run, {**reproduction_data, "text": f"try {i}"}
                ).status_code
                == 302
            )
        response = post_attestation(contributor_client, run, {**reproduction_data, "text": "third"})
        assert response.status_code == 429
        message = response.context["form"].non_field_errors()[0]
        assert message.startswith("Too many submissions: you may file 2 per hour. Please try again in")
        assert Attestation.objects.count() == 2

    def test_per_ip_limit_covers_several_accounts(
        self, settings, client, run, contributor, other_contributor, reproduction_data
    ):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "100/h", "ip": "2/h"}
        client.force_login(contributor)
        assert post_attestation(client, run, {**reproduction_data, "text": "a"}).status_code == 302
        assert post_attestation(client, run, {**reproduction_data, "text": "b"}).status_code == 302
        client.force_login(other_contributor)
        response = post_attestation(client, run, {**reproduction_data, "text": "c"})
        assert response.status_code == 429
        assert "your network address may file 2 per hour" in response.context["form"].non_field_errors()[0]
        assert Attestation.objects.count() == 2

    def test_reports_count_towards_the_same_limit(self, settings, contributor_client, run, reproduction_data):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "1/h", "ip": "100/h"}
        assert post_attestation(contributor_client, run, reproduction_data).status_code == 302
        response = contributor_client.post(
            reverse("attestations:report-create", args=[run.pk]), {"category": "other", "description": "x"}
        )
        assert response.status_code == 429
        assert IssueReport.objects.count() == 0

    def test_api_answers_429_with_retry_after(self, settings, contributor, run):
        from rest_framework.test import APIClient

        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "1/h", "ip": "100/h"}
        client = APIClient()
        client.force_authenticate(contributor)
        url = reverse("issue-report-list")
        assert client.post(url, {"run": run.pk, "category": "other", "description": "a"}).status_code == 201
        response = client.post(url, {"run": run.pk, "category": "other", "description": "b"})
        assert response.status_code == 429
        assert response.json()["detail"].startswith("Too many submissions")
        assert 0 < int(response["Retry-After"]) <= 3600
        assert IssueReport.objects.count() == 1


class TestOtherUsersObjects:
    def test_other_contributor_cannot_see_pending_or_rejected(
        self, client, run, contributor, other_contributor, moderator
    ):
        pending = submit_note(run, contributor, text="pending secret")
        rejected = submit_note(run, contributor, text="rejected secret")
        services.attestation_reject(attestation=rejected, moderator=moderator, reason="No.")
        client.force_login(other_contributor)
        for attestation in (pending, rejected):
            assert (
                client.get(reverse("attestations:attestation-detail", args=[attestation.pk])).status_code
                == 404
            )
            assert client.get(reverse("attestation-detail", args=[attestation.pk])).status_code == 404
        public = client.get(reverse("attestations:run-attestations", args=[run.pk])).content.decode()
        assert "pending secret" not in public and "rejected secret" not in public
        api = client.get(reverse("run-attestation-list", args=[run.pk])).json()
        assert api["count"] == 0

    def test_visitor_sees_no_pending_content_on_the_run_section(self, client, run, contributor):
        submit_note(run, contributor, text="pending secret")
        body = client.get(reverse("attestations:run-attestations", args=[run.pk])).content.decode()
        assert "pending secret" not in body
        assert "No approved reproductions or notes yet." in body
