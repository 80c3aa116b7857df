"""Holes found from outside (issue 11): each was a 500, an unlimited body or a missing header."""
# ruff: noqa: F811 (the fixtures imported from the attestations and site tests are test arguments)

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from attestations import services
from registry.models import BenchmarkRun
from tests.attestations.conftest import (  # noqa: F401 (fixtures)
    liger_csv,
    run,
    runs,
)
from tests.site.conftest import import_rows, liger_rows  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def registry(import_rows):  # noqa: F811
    import_rows(liger_rows())
    return BenchmarkRun.objects.order_by("pk").first()


class TestNulInUrls:
    @pytest.mark.parametrize(
        "url",
        [
            "/implementations/%00/",
            "/api/v1/kernels/%00/",
            "/api/v1/sources/%00/",
            "/kernels/%00/",
            "/search/?q=%00",
            "/api/v1/runs/?kernel=%00",
        ],
    )
    def test_a_nul_character_is_a_400_not_a_server_error(self, client, registry, url):
        response = client.get(url)

        assert response.status_code == 400

    def test_the_api_says_so_in_json(self, client, registry):
        response = client.get("/api/v1/kernels/%00/")

        assert response.status_code == 400
        assert "NUL" in response.json()["detail"]


class TestDeepJson:
    def test_a_document_nested_100000_deep_is_a_400(self, contributor):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_regenerate(user=contributor).key}")

        response = client.generic(
            "POST", reverse("attestation-list"), "[" * 100_000, content_type="application/json"
        )

        assert response.status_code == 400
        assert "nested" in response.json()["detail"]


class TestAdminYearOverflow:
    @pytest.mark.parametrize(
        "query",
        [
            "created_at__year=99999999999",
            "created_at__year=2024&created_at__month=99999999999",
            "created_at__year=99999",
        ],
    )
    def test_an_overflowing_year_is_not_a_server_error(self, admin_client, query):
        response = admin_client.get(f"{reverse('admin:attestations_auditentry_changelist')}?{query}")

        assert 300 <= response.status_code < 500

    def test_a_year_lookup_on_a_list_without_date_hierarchy_too(self, admin_client, registry):
        url = reverse("admin:registry_benchmarkrun_changelist")

        response = admin_client.get(f"{url}?published_at__year=99999999999")

        assert 300 <= response.status_code < 500


class TestMetricsBehindAProxy:
    def test_the_standard_forwarded_header_is_refused_too(self, client, settings):
        settings.METRICS_TOKEN = ""

        response = client.get(reverse("metrics"), REMOTE_ADDR="127.0.0.1", HTTP_FORWARDED="for=203.0.113.9")

        assert response.status_code == 403


class TestBodyLimits:
    def test_a_10_mb_upload_to_the_report_form_is_refused(self, contributor_client, run, settings):
        body = b"x" * (10 * 1024 * 1024)
        response = contributor_client.post(
            reverse("attestations:report-create", args=[run.pk]),
            {"category": "wrong_value", "description": "big", "file": SimpleUploadedFile("big.bin", body)},
        )

        assert response.status_code == 413

    def test_an_oversized_json_body_is_refused_in_json(self, contributor):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_regenerate(user=contributor).key}")
        body = '{"text": "' + "x" * (2 * 1024 * 1024) + '"}'

        response = client.generic("POST", reverse("attestation-list"), body, content_type="application/json")

        assert response.status_code == 413
        assert response["Content-Type"] == "application/json"
        assert "limit" in response.json()["detail"]

    def test_a_body_over_djangos_own_limit_without_a_length_is_json_under_the_api(
        self, settings, contributor
    ):
        """Django's RequestDataTooBig (a 400 from its handler400) answers JSON under /api/."""
        settings.REQUEST_BODY_MAX_BYTES = 10 * 1024 * 1024
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
        client = Client(raise_request_exception=False)
        client.force_login(contributor)

        response = client.post(
            reverse("attestation-list"), {"text": "x" * 4096}, headers={"Accept": "application/json"}
        )

        assert response.status_code in (400, 403)
        assert response["Content-Type"] == "application/json"


class TestSignupLimit:
    def test_signup_429_says_when_to_retry(self, client, settings):
        settings.ACCOUNT_RATE_LIMITS = {"signup": "1/m/ip"}
        data = {"email": "a@example.org", "username": "a", "password1": "x", "password2": "y"}
        client.post(reverse("account_signup"), data)

        response = client.post(reverse("account_signup"), data)

        assert response.status_code == 429
        assert response["Retry-After"] == "60"


class TestPageNumbers:
    @pytest.mark.parametrize("page", ["abc", "0", "999"])
    @pytest.mark.parametrize(
        "url",
        [
            "/api/v1/runs/",
            "/api/v1/kernels/",
            "/api/v1/runs/{run}/attestations/",
            "/api/v1/attestations/",
            "/api/v1/issue-reports/",
            "/api/v1/jobs/",
        ],
    )
    def test_every_list_answers_a_bad_page_with_a_400_naming_it(
        self, client, registry, contributor, url, page
    ):
        client.force_login(contributor)

        response = client.get(url.format(run=registry.pk), {"page": page})

        assert response.status_code == 400, response.content
        assert "page" in response.json()
