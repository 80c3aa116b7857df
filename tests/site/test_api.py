"""The read API: its contract, filters, conditional requests, throttling and OpenAPI schema."""

import hashlib

import pytest
import yaml
from django.urls import reverse
from drf_spectacular.validation import validate_schema
from rest_framework.throttling import AnonRateThrottle

from registry import digests
from registry.cache import generation_bump
from registry.models import BenchmarkRun
from tests.site.conftest import liger_rows

CONTRACT_FIELDS = {
    "external_id",
    "kernel",
    "implementation",
    "operation_mode",
    "metric",
    "unit",
    "median",
    "p20",
    "p80",
    "rank",
    "group_size",
    "comparison_key",
    "digest",
    "evidence_level",
    "withdrawn",
    "url",
}


@pytest.fixture
def registry(import_rows):
    import_rows(liger_rows(gpus=2, xs=(1024, 2048, 4096)))
    return BenchmarkRun.objects.order_by("pk")


@pytest.mark.django_db
class TestRunsEndpoint:
    def test_every_contract_field_is_there(self, client, registry):
        response = client.get(reverse("run-list"))
        assert response.status_code == 200
        body = response.json()
        assert body["count"] == registry.count() == 24
        assert CONTRACT_FIELDS <= set(body["results"][0])

    def test_filters_by_gpu_pass_implementation_and_parameter(self, client, registry):
        response = client.get(
            reverse("run-list"),
            {
                "gpu": "nvidia-a100-sxm4-80gb",
                "operation_mode": "backward",
                "implementation": "liger",
                "param": ["T:2048", "bsz:8"],
                "dtype": "bf16",
            },
        )
        assert response.status_code == 200
        results = response.json()["results"]
        assert len(results) == 1
        assert results[0]["workload_parameters"]["T"] == 2048
        assert (results[0]["gpu"], results[0]["operation_mode"], results[0]["implementation"]) == (
            "nvidia-a100-sxm4-80gb",
            "backward",
            "liger",
        )

    def test_a_parameter_named_like_a_lookup_is_still_a_key(self, client, registry):
        response = client.get(reverse("run-list"), {"param": "contains:1"})
        assert response.status_code == 200
        assert response.json()["count"] == 0

    def test_sort_by_median_descending_then_by_id(self, client, registry):
        response = client.get(reverse("run-list"), {"sort": "-median", "page_size": 500})
        medians = [r["median"] for r in response.json()["results"]]
        assert medians == sorted(medians, reverse=True)
        assert len(medians) == 24

    @pytest.mark.parametrize("sort", [",,", "median,", ",-median", "median,,rank"])
    def test_an_empty_sort_field_is_a_400_naming_the_parameter(self, client, registry, sort):
        response = client.get(reverse("run-list"), {"sort": sort})
        assert response.status_code == 400
        assert "Empty sort field" in response.json()["sort"][0]

    def test_pages_cover_every_run_once(self, client, registry):
        seen = []
        for page in (1, 2, 3):
            response = client.get(reverse("run-list"), {"page_size": 10, "page": page, "sort": "rank"})
            assert response.status_code == 200
            seen += [r["id"] for r in response.json()["results"]]
        assert sorted(seen) == sorted(registry.values_list("pk", flat=True))


@pytest.mark.django_db
class TestConditionalRequests:
    def test_run_has_etag_and_last_modified_and_answers_304(self, client, registry):
        run = registry.first()
        url = reverse("run-detail", args=[run.pk])
        first = client.get(url)
        assert first.status_code == 200
        assert first["ETag"].startswith('"')
        assert first["Last-Modified"].endswith("GMT")
        again = client.get(url, headers={"if-none-match": first["ETag"]})
        assert again.status_code == 304
        assert again.content == b""

    def test_run_etag_changes_when_the_run_changes(self, client, registry):
        run = registry.first()
        url = reverse("run-detail", args=[run.pk])
        etag = client.get(url)["ETag"]
        BenchmarkRun.objects.filter(pk=run.pk).update(withdrawn=True)
        generation_bump()  # a bulk update sends no signal; every writing service bumps like this
        response = client.get(url, headers={"if-none-match": etag})
        assert response.status_code == 200
        assert response["ETag"] != etag
        assert response.json()["withdrawn"] is True

    def test_manifest_etag_is_the_digest(self, client, registry):
        run = registry.first()
        for url in (reverse("run-manifest", args=[run.pk]), reverse("manifest-detail", args=[run.digest])):
            response = client.get(url)
            assert response.status_code == 200
            assert response["Content-Type"] == "application/json"
            assert response["ETag"] == '"' + run.digest.removeprefix("sha256:") + '"'
            assert response.content == digests.canonical_bytes(run.manifest)
            assert "sha256:" + hashlib.sha256(response.content).hexdigest() == run.digest
            assert client.get(url, headers={"if-none-match": response["ETag"]}).status_code == 304
            since = client.get(url, headers={"if-modified-since": response["Last-Modified"]})
            assert since.status_code == 304


@pytest.mark.django_db
class TestOtherEndpoints:
    def test_groups_list_their_size_and_best(self, client, registry):
        response = client.get(reverse("comparison-group-list"), {"kernel": "geglu", "page_size": 500})
        assert response.status_code == 200
        groups = response.json()["results"]
        assert len(groups) == response.json()["count"] == 12
        assert {g["size"] for g in groups} == {2}
        key = groups[0]["comparison_key"]
        assert groups[0]["best"] == min(
            BenchmarkRun.objects.filter(comparison_key=key).values_list("median", flat=True)
        )

    def test_kernels_implementations_environments_sources(self, client, registry):
        assert client.get(reverse("kernel-list")).json()["results"][0]["slug"] == "geglu"
        providers = {i["provider"] for i in client.get(reverse("implementation-list")).json()["results"]}
        assert providers == {"liger", "huggingface"}
        gpus = client.get(reverse("environment-list"), {"vendor": "NVIDIA"}).json()
        assert gpus["count"] == 2
        source = client.get(reverse("source-detail", args=["liger-kernel"])).json()
        assert source["license"] == "BSD-2-Clause"
        assert source["run_count"] == 24
        assert source["imports"][0]["created"] == 24


@pytest.mark.django_db
class TestThrottling:
    def test_anonymous_clients_get_429_with_retry_after(self, client, registry, monkeypatch):
        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/minute"})
        statuses = [client.get(reverse("run-list")).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        response = client.get(reverse("run-list"))
        assert response.status_code == 429
        assert 0 < int(response["Retry-After"]) <= 60
        assert "throttled" in response.json()["detail"].lower()

    def test_the_export_is_throttled_too(self, client, registry, monkeypatch):
        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "1/minute"})
        assert client.get(reverse("export-csv")).status_code == 200
        response = client.get(reverse("export-csv"))
        assert response.status_code == 429
        assert "Retry-After" in response


@pytest.mark.django_db
class TestSchema:
    def test_schema_is_valid_openapi_3(self, client):
        response = client.get(reverse("api-schema"))
        assert response.status_code == 200
        schema = yaml.safe_load(response.content)
        validate_schema(schema)  # raises on any violation of the OpenAPI 3 JSON schema
        assert schema["openapi"].startswith("3.")
        for path in (
            "/api/v1/runs/",
            "/api/v1/runs/{id}/manifest/",
            "/api/v1/kernels/",
            "/api/v1/implementations/",
            "/api/v1/environments/",
            "/api/v1/sources/",
            "/api/v1/groups/",
            "/api/v1/groups/{comparison_key}/",
            "/api/v1/manifests/{digest}/",
            "/api/v1/export/runs.csv",
            "/api/v1/export/runs.jsonl",
        ):
            assert path in schema["paths"], path
        run_params = {p["name"] for p in schema["paths"]["/api/v1/runs/"]["get"]["parameters"]}
        assert {"kernel", "gpu", "param", "sort", "page", "page_size", "evidence_level"} <= run_params

    def test_docs_page_uses_local_assets(self, client):
        response = client.get(reverse("api-docs"))
        assert response.status_code == 200
        body = response.content.decode()
        assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in body
        assert "cdn." not in body and "unpkg" not in body


@pytest.mark.django_db
class TestExportDownloads:
    @pytest.mark.parametrize("accept", ["text/html", "application/xml", "text/csv", "*/*"])
    def test_a_download_link_works_whatever_the_accept_header(self, client, registry, accept):
        response = client.get(reverse("export-csv"), headers={"accept": accept})
        assert response.status_code == 200
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert len(b"".join(response.streaming_content).splitlines()) == 25

    def test_json_lines_download_names_its_file(self, client, registry):
        response = client.get(reverse("export-jsonl"), {"kernel": "geglu"})
        assert response.status_code == 200
        assert response["Content-Type"] == "application/jsonl"
        assert response["Content-Disposition"] == 'attachment; filename="kernelindex-manifests.jsonl"'
        assert len(b"".join(response.streaming_content).splitlines()) == 24
