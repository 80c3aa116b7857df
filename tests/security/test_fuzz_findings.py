"""What the matrix and schemathesis found, pinned so it stays fixed (each was a 500, a schema
that promised what the API did not do, or a hole)."""

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return Client(raise_request_exception=False)


class TestServerErrorsFound:
    def test_format_suffixes_of_groups_and_manifests(self, client, world):
        for url in (
            f"/api/v1/runs/{world.run.pk}/manifest.json",
            "/api/v1/groups.json",
            f"/api/v1/groups/{world.run.comparison_key}.json",
        ):
            assert client.get(url).status_code == 200, url

    @pytest.mark.parametrize("value", ["9" * 30, "-" + "9" * 30, "0"])
    def test_job_filters_by_any_whole_number(self, client, world, value):
        response = client.get(reverse("job-list"), {"run": value, "result_run": value})
        assert response.status_code == 200
        assert response.json()["count"] == 0

    def test_a_job_filter_that_is_not_a_whole_number_is_a_400(self, client, world):
        response = client.get(reverse("job-list"), {"run": "1.5"})
        assert response.status_code == 400
        assert "run" in response.json()

    @pytest.mark.parametrize(
        "moment",
        [
            "0180-06-06T05:46:55-22:00",
            "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-10:00",
            "2024-09-03T15:38:42+15:59",
        ],
    )
    def test_utc_offsets_postgresql_does_not_take(self, client, world, moment):
        for url in (reverse("run-list"), reverse("registry:run-list"), reverse("export-csv")):
            assert (
                client.get(url, {"observed_before": moment, "observed_after": moment}).status_code == 200
            ), url


class TestTheSchemaSaysWhatTheApiDoes:
    def test_an_unknown_api_url_answers_json(self, client):
        response = client.get("/api/v1/no-such-thing/")
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}

    def test_an_unknown_page_is_still_the_sites_page(self, client):
        response = client.get("/no-such-page/")
        assert response.status_code == 404
        assert response["Content-Type"].startswith("text/html")

    def test_an_empty_page_size_is_the_default(self, client, world):
        response = client.get(reverse("run-list"), {"page_size": ""})
        assert response.status_code == 200

    def test_every_operation_documents_its_errors(self, client):
        schema = client.get(reverse("api-schema"), {"format": "json"}).json()
        for path, item in schema["paths"].items():
            for method, operation in item.items():
                assert {"403", "404", "429"} <= operation["responses"].keys(), f"{method} {path}"
                assert "Retry-After" in operation["responses"]["429"]["headers"]

    def test_a_job_without_a_result_has_a_null_agreement(self, client, world):
        schema = client.get(reverse("api-schema"), {"format": "json"}).json()
        assert schema["components"]["schemas"]["Job"]["properties"]["agreement_pct"]["nullable"] is True
        assert client.get(reverse("job-detail", args=[world.job.pk])).json()["agreement_pct"] is None
