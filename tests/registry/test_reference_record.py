"""The reference record of ../shared/DESIGN.md, imported from the bundled file."""

import hashlib

import pytest
from django.urls import reverse

from registry import digests
from registry.models import BenchmarkRun
from registry.sources.liger.services import bundled_data_load

REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)


@pytest.fixture(scope="module")
def bundled(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        summaries = bundled_data_load()
    yield summaries
    with django_db_blocker.unblock():
        from django.core.management import call_command

        call_command("flush", "--noinput", verbosity=0)


@pytest.mark.django_db
class TestReferenceRecord:
    def test_every_bundled_row_becomes_one_run(self, bundled):
        # The history comes first and publishes every row of the bundled file (its last version);
        # 2,940 distinct values were published over 35 versions, 2,448 of them are current.
        assert bundled["liger-kernel-history"].created == 2940
        assert (bundled["liger-kernel"].created, bundled["liger-kernel"].unchanged) == (0, 2448)
        assert BenchmarkRun.objects.count() == 2940
        assert BenchmarkRun.objects.current().count() == 2448
        assert BenchmarkRun.objects.values("external_id").distinct().count() == 2940

    def test_reference_record_has_its_figures_and_rank(self, bundled):
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        assert run.median == 144.2132110595703
        assert run.source_metrics == {
            "ms_20": 144.2132110595703,
            "ms_50": 144.2132110595703,
            "ms_80": 144.2132110595703,
        }
        assert (run.rank, run.group_size) == (2, 2)
        assert run.evidence_level == "reported"
        best = BenchmarkRun.objects.get(comparison_key=run.comparison_key, rank=1)
        assert best.implementation.provider == "liger"
        assert best.median == 141.28550720214844

    def test_reference_workload_has_tensor_shapes(self, bundled):
        workload = BenchmarkRun.objects.get(external_id=REFERENCE_ID).workload
        assert workload.summary == "seq 8192, batch 8, hidden 4096, intermediate 11008, bf16"
        assert workload.tensors == [
            {"name": "x", "dtype": "bf16", "shape": [8, 8192, 4096]},
            {"name": "w_up", "dtype": "bf16", "shape": [11008, 4096]},
            {"name": "w_down", "dtype": "bf16", "shape": [4096, 11008]},
            {"name": "w_gate", "dtype": "bf16", "shape": [11008, 4096]},
        ]

    def test_api_finds_the_reference_record_by_external_id(self, client, bundled):
        response = client.get(reverse("run-list"), {"external_id": REFERENCE_ID})
        assert response.status_code == 200
        body = response.json()
        assert body["count"] == 1
        record = body["results"][0]
        assert record["median"] == 144.2132110595703
        assert (record["rank"], record["group_size"]) == (2, 2)
        assert record["kernel"] == "geglu"
        assert record["url"] == reverse("registry:run-detail", args=[record["id"]])

    def test_manifest_is_canonical_and_hashes_to_the_run_digest(self, client, bundled):
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        response = client.get(reverse("run-manifest", args=[run.pk]))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response.content == digests.canonical_bytes(run.manifest)
        assert "sha256:" + hashlib.sha256(response.content).hexdigest() == run.digest
        kinds = [item["kind"] for item in response.json()["items"]]
        assert kinds == ["BenchmarkRun", "BenchmarkProtocol", "ExecutionEnvironment"]


@pytest.mark.django_db
class TestReferenceRecordSeries:
    def test_its_page_shows_its_series_of_one_value_still_current(self, client, bundled):
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        html = client.get(run.get_absolute_url()).content.decode()
        assert "This value is current</strong>: the only value the source has published" in html
        assert "https://github.com/linkedin/Liger-Kernel/pull/196" in html
