"""/metrics: Prometheus exposition with request figures by view and the registry's own figures."""

import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from registry.sources.liger.sync import liger_sync

TOKEN = "metrics-test-token"


def _samples(response) -> dict:
    """{(name, frozenset(labels)): value} for every sample in the answer."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def _key(name: str, **labels) -> tuple:
    return (name, frozenset(labels.items()))


@pytest.mark.django_db
class TestMetricsAccess:
    def test_a_request_without_the_token_is_refused(self, client, settings):
        settings.METRICS_TOKEN = TOKEN

        response = client.get(reverse("metrics"))

        assert response.status_code == 403

    def test_a_wrong_token_is_refused(self, client, settings):
        settings.METRICS_TOKEN = TOKEN

        response = client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer nope")

        assert response.status_code == 403

    def test_the_token_opens_it(self, client, settings):
        settings.METRICS_TOKEN = TOKEN

        response = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain")

    def test_without_a_token_only_a_direct_loopback_request_is_answered(self, client, settings):
        settings.METRICS_TOKEN = ""

        direct = client.get(reverse("metrics"), REMOTE_ADDR="127.0.0.1")
        proxied = client.get(reverse("metrics"), REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
        remote = client.get(reverse("metrics"), REMOTE_ADDR="203.0.113.9")

        assert (direct.status_code, proxied.status_code, remote.status_code) == (200, 403, 403)


@pytest.mark.django_db
class TestMetricsFigures:
    @pytest.fixture
    def scrape(self, client, settings):
        settings.METRICS_TOKEN = TOKEN

        def scrape():
            response = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
            assert response.status_code == 200
            return _samples(response)

        return scrape

    def test_requests_are_counted_by_view(self, client, scrape):
        key = _key(
            "django_http_requests_total_by_view_transport_method_total",
            view="healthz",
            transport="http",
            method="GET",
        )
        before = scrape().get(key, 0)
        client.get(reverse("healthz"))
        client.get(reverse("healthz"))

        after = scrape()

        assert after[key] == before + 2
        latency = [k for k in after if k[0] == "django_http_requests_latency_seconds_by_view_method_count"]
        assert any(("view", "healthz") in labels for _, labels in latency)

    def test_runs_imports_and_syncs_are_reported(self, pypi, scrape):
        pypi.add("0.8.5")
        liger_sync()
        pypi.add("9.9.9", sha256="0" * 64)
        liger_sync()

        samples = scrape()

        # 26 rows in three files; the cutile file's four JSD/torch/B200 runs supersede the main
        # file's (one current run per target), so 22 are current.
        assert samples[_key("kernelindex_runs", source="liger-kernel", evidence_level="reported")] == 22
        assert samples[_key("kernelindex_syncs_total", source="liger-kernel", status="imported")] == 1
        assert samples[_key("kernelindex_syncs_total", source="liger-kernel", status="failed")] == 1
        assert samples[_key("kernelindex_source_imports_total", source="liger-kernel")] == 3
        created = _key(
            "kernelindex_last_import_rows",
            source="liger-kernel",
            filename="all_benchmark_data_cutile.csv",
            release="0.8.5",
            outcome="created",
        )
        assert samples[created] == 10

    def test_jobs_are_counted_by_state_and_gpu_queue_with_durations(self, jobs, scrape):
        samples = scrape()

        a100, b200 = "gpu.nvidia-a100-sxm4-80gb", "gpu.nvidia-b200"
        assert samples[_key("kernelindex_jobs", state="queued", queue=a100)] == 1
        assert samples[_key("kernelindex_jobs", state="running", queue=a100)] == 1
        assert samples[_key("kernelindex_jobs", state="failed", queue=b200)] == 1
        assert samples[_key("kernelindex_job_duration_seconds_count", queue=b200)] == 1
        assert samples[_key("kernelindex_job_duration_seconds_bucket", queue=b200, le="60.0")] == 0
        assert samples[_key("kernelindex_job_duration_seconds_bucket", queue=b200, le="120.0")] == 1
        assert 89 <= samples[_key("kernelindex_job_duration_seconds_sum", queue=b200)] <= 100

    def test_moderation_queues_appear_once_their_models_exist(self, scrape):
        from django.apps import apps

        names = {name for name, _ in scrape()}

        has_attestations = any(
            m.__name__ == "Attestation" for m in apps.get_app_config("attestations").get_models()
        )
        assert ("kernelindex_moderation_queue" in names) == has_attestations
