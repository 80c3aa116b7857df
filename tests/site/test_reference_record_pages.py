"""The reference record of DESIGN.md, as the site and the API show it, on the real bundled data."""

import csv
import hashlib
import io
import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from registry.models import EVIDENCE_EXPLANATIONS, BenchmarkRun

REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)
SECTIONS = [
    "Primary measurement",
    "Source-native metrics",
    "Identity",
    "Correctness",
    "Workload",
    "Measurements",
    "Speed of light",
    "Series",
    "Protocol",
    "Environment",
    "Artifacts",
    "Replications and notes",
    "Canonical manifest",
    "Cite this record",
    "Report an issue with this run",
]


def text_of(response) -> str:
    """The page's visible text, tags removed and whitespace collapsed."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).replace("&#x27;", "'").replace("&quot;", '"').split())


@pytest.fixture
def reference():
    return BenchmarkRun.objects.select_related("workload").get(external_id=REFERENCE_ID)


@pytest.fixture
def best(reference):
    return BenchmarkRun.objects.get(comparison_key=reference.comparison_key, rank=1)


@pytest.mark.django_db
class TestReferenceRunPage:
    def test_page_shows_every_section_of_the_design_in_order(self, client, bundled, reference):
        response = client.get(reverse("registry:run-detail", args=[reference.pk]))
        assert response.status_code == 200
        headings = re.findall(r"<h2 id=\"[^\"]+\">([^<]+)</h2>", response.content.decode())
        assert headings == SECTIONS

    def test_primary_measurement_has_median_rank_and_compare_with_first(
        self, client, bundled, reference, best
    ):
        response = client.get(reverse("registry:run-detail", args=[reference.pk]))
        text = text_of(response)
        assert "144.2 ms" in text
        assert "rank 2 in its comparison group of 2 runs" in text
        assert "Source-native comparison: the group is formed from the source's own data." in text
        assert "2024-09-03 15:38:42" in text
        assert "Compare with #1 → liger, 141.29 ms (-2.0%)" in text
        assert reverse("registry:compare", args=[reference.pk, best.pk]) in response.content.decode()

    def test_sections_carry_the_reference_figures(self, client, bundled, reference):
        text = text_of(client.get(reverse("registry:run-detail", args=[reference.pk])))
        for expected in [
            "ms_20 144.2132110595703",
            "ms_50 144.2132110595703",
            "ms_80 144.2132110595703",
            "Hugging Face Transformers",
            "unknown (the source does not record it)",
            "seq 8192, batch 8, hidden 4096, intermediate 11008, bf16",
            reference.comparison_key,
            "Liger-Kernel benchmarks",
            REFERENCE_ID,
            reference.digest,
            "“passed” by the source",
            "correctness policy was not published",
            "x bf16 [8, 8192, 4096]",
            "w_up bf16 [11008, 4096]",
            "w_down bf16 [4096, 11008]",
            "w_gate bf16 [11008, 4096]",
            "Reference comparator: not asserted.",
            "median 144.2132110595703",
            "Harness Liger-Kernel benchmark scripts",
            "https://github.com/linkedin/Liger-Kernel",
            "CUDA events",
            "Primary statistic median",
            "liger-benchmark/do-bench-cuda-events",
            "only comparable within one kernel, workload, timed pass and GPU",
            "GPU vendor NVIDIA",
            "NVIDIA A100 SXM4 80GB",
            "Form factor SXM4",
            "Architecture sm_80",
            "none of CUDA, driver or torch versions are known",
            "None published with this run.",
            "Attestations never change the evidence level; only a KernelIndex-controlled rerun does.",
            "BSD-2-Clause",
            "All results for GeGLU MLP",
        ]:
            assert expected.lower() in text.lower(), expected

    def test_evidence_badge_explains_the_level(self, client, bundled, reference):
        text = text_of(client.get(reverse("registry:run-detail", args=[reference.pk])))
        assert f"Evidence: Reported {EVIDENCE_EXPLANATIONS['reported']}" in text

    def test_manifest_section_lists_the_spec_digests_and_the_document(self, client, bundled, reference):
        response = client.get(reverse("registry:run-detail", args=[reference.pk]))
        body = response.content.decode()
        for digest in [
            reference.protocol.digest,
            reference.workload.digest,
            reference.environment.digest,
            reference.implementation.digest,
        ]:
            assert digest in body
        assert "kernelindex.dev/v1alpha1" in body
        for kind in ("BenchmarkRun", "BenchmarkProtocol", "ExecutionEnvironment"):
            assert f"&quot;kind&quot;: &quot;{kind}&quot;" in body

    def test_cite_section_has_permalink_digest_and_access_date(self, client, bundled, reference):
        text = text_of(client.get(reverse("registry:run-detail", args=[reference.pk])))
        assert f"Permalink http://127.0.0.1:8000/runs/{reference.pk}/" in text
        assert f"By digest http://127.0.0.1:8000/runs/{reference.digest}/" in text
        assert f"Accessed {timezone.now().date().isoformat()}" in text

    def test_the_page_links_its_json(self, client, bundled, reference):
        body = client.get(reverse("registry:run-detail", args=[reference.pk])).content.decode()
        assert f'href="{reverse("run-detail", args=[reference.pk])}"' in body
        assert f'href="{reverse("run-manifest", args=[reference.pk])}"' in body

    def test_permalink_by_digest_shows_the_same_record(self, client, bundled, reference):
        response = client.get(reverse("registry:run-by-digest", args=[reference.digest]))
        assert response.status_code == 200
        assert response.context["run"].pk == reference.pk


@pytest.mark.django_db
class TestCompareWithTheBest:
    def test_compare_with_first_redirects_to_the_pair(self, client, bundled, reference, best):
        response = client.get(reverse("registry:run-compare-best", args=[reference.pk]))
        assert response.status_code == 302
        assert response["Location"] == reverse("registry:compare", args=[reference.pk, best.pk])

    def test_compare_page_shows_ratio_percent_and_same_group(self, client, bundled, reference, best):
        response = client.get(reverse("registry:compare", args=[reference.pk, best.pk]))
        assert response.status_code == 200
        text = text_of(response)
        assert "144.21 ms" in text and "141.29 ms" in text
        assert "Change of the median from A to B -2.0%" in text
        assert "Ratio B / A 0.980" in text
        assert "Comparable." in text
        assert "Not comparable" not in text

    def test_differing_fields_are_highlighted(self, client, bundled, reference, best):
        response = client.get(reverse("registry:compare", args=[reference.pk, best.pk]))
        identity = response.context["sections"][0]
        differing = {row["label"] for row in identity.rows if row["differs"]}
        assert {"Implementation", "Project", "Revision"} <= differing
        assert "Kernel" not in differing
        assert response.content.decode().count('class="differs"') >= len(differing)

    def test_another_gpu_is_named_as_what_breaks_comparability(self, client, bundled, reference):
        other_gpu = BenchmarkRun.objects.filter(
            kernel=reference.kernel,
            operation_mode=reference.operation_mode,
            metric=reference.metric,
            implementation__provider="huggingface",
            workload=reference.workload,
        ).exclude(environment__product=reference.environment.product)
        other = (
            other_gpu.first()
            or BenchmarkRun.objects.exclude(environment__product=reference.environment.product).first()
        )
        response = client.get(reverse("registry:compare", args=[reference.pk, other.pk]))
        assert response.status_code == 200
        text = text_of(response)
        assert "Not comparable:" in text
        assert f"different GPU : {reference.environment.product} vs {other.environment.product}" in text
        assert {
            "field": "GPU",
            "a": reference.environment.product,
            "b": other.environment.product,
        } in response.context["breaks"]


@pytest.mark.django_db
class TestKernelPage:
    def test_geglu_has_a100_charts_with_both_implementations(self, client, bundled):
        response = client.get(reverse("registry:kernel-detail", args=["geglu"]))
        assert response.status_code == 200
        panels = response.context["panels"]
        a100 = [p for p in panels if p.gpu == "NVIDIA A100 SXM4 80GB" and p.metric == "latency"]
        assert {p.operation_mode for p in a100} == {"forward", "backward", "full"}
        for panel in a100:
            assert [s.label for s in panel.series] == ["huggingface", "liger"]
            assert [p.x for p in panel.series[0].points] == [1024, 2048, 4096, 8192]
        body = response.content.decode()
        assert body.count('<svg class="chart"') == len(panels)
        assert body.count('class="series-line"') == sum(len(p.series) for p in panels)
        assert 'role="img"' in body and "<desc id=" in body

    def test_filters_narrow_runs_and_charts(self, client, bundled):
        response = client.get(
            reverse("registry:kernel-detail", args=["geglu"]),
            {"operation_mode": "backward", "metric": "latency", "param": "T:8192", "sort": "median"},
        )
        assert response.status_code == 200
        runs = list(response.context["page"].object_list)
        assert [r.implementation.provider for r in runs] == ["liger", "huggingface"]
        assert [r.median for r in runs] == [141.28550720214844, 144.2132110595703]
        assert len(response.context["panels"]) == 1

    def test_chart_table_fallback_holds_the_reference_figure(self, client, bundled, reference):
        response = client.get(
            reverse("registry:kernel-detail", args=["geglu"]),
            {"operation_mode": "backward", "metric": "latency"},
        )
        body = response.content.decode()
        assert f'<a href="{reference.get_absolute_url()}">144.21</a>' in body


@pytest.mark.django_db
class TestKernelPagePagination:
    def test_448_runs_come_in_pages_of_50_without_repeats(self, client, bundled):
        url = reverse("registry:kernel-detail", args=["fused_neighborhood_attention"])
        seen = []
        for number in range(1, 10):
            response = client.get(url, {"page": number, "sort": "median"})
            assert response.status_code == 200
            seen += [run.pk for run in response.context["page"].object_list]
        assert len(seen) == len(set(seen)) == 448
        assert 'rel="next"' not in response.content.decode()

    def test_a_lines_label_names_only_the_settings_that_differ(self, client, bundled):
        response = client.get(reverse("registry:kernel-detail", args=["fused_neighborhood_attention"]))
        labels = [s.label for s in response.context["panels"][0].series]
        assert all("bias" not in label for label in labels)
        assert len(set(labels)) == len(labels) > 1


@pytest.mark.django_db
class TestBulkExport:
    def test_csv_streams_every_public_run(self, client, bundled):
        response = client.get(reverse("export-csv"))
        assert response.status_code == 200
        assert response.streaming
        assert response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        # Every value the source ever published (its history): 2,448 current, 492 replaced or dropped.
        assert len(rows) == BenchmarkRun.objects.count() == 2940
        reference = next(r for r in rows if r["external_id"] == REFERENCE_ID)
        assert float(reference["median"]) == 144.2132110595703
        assert (reference["rank"], reference["group_size"]) == ("2", "2")

    def test_json_lines_are_canonical_manifests_hashing_to_run_digests(self, client, bundled):
        response = client.get(reverse("export-jsonl"))
        assert response.status_code == 200
        assert response.streaming
        lines = b"".join(response.streaming_content).splitlines()
        assert len(lines) == 2940
        digests = {"sha256:" + hashlib.sha256(line).hexdigest() for line in lines}
        assert digests == set(BenchmarkRun.objects.values_list("digest", flat=True))
        assert json.loads(lines[0])["kind"] == "RunManifest"

    def test_export_honours_filters(self, client, bundled):
        response = client.get(reverse("export-csv"), {"kernel": "geglu", "gpu": "nvidia-a100-sxm4-80gb"})
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        assert len(rows) == BenchmarkRun.objects.filter(kernel__slug="geglu").count() == 48


@pytest.mark.django_db
class TestReferenceInTheApi:
    def test_group_endpoint_ranks_liger_first(self, client, bundled, reference):
        response = client.get(reverse("comparison-group-detail", args=[reference.comparison_key]))
        assert response.status_code == 200
        body = response.json()
        assert body["size"] == 2
        assert [(r["implementation"], r["rank"]) for r in body["runs"]] == [("liger", 1), ("huggingface", 2)]
        assert body["best"] == 141.28550720214844

    def test_manifest_by_digest_is_the_canonical_bytes(self, client, bundled, reference):
        response = client.get(reverse("manifest-detail", args=[reference.digest]))
        assert response.status_code == 200
        assert "sha256:" + hashlib.sha256(response.content).hexdigest() == reference.digest

    def test_kernel_endpoint_counts_runs(self, client, bundled):
        response = client.get(reverse("kernel-detail", args=["geglu"]))
        assert response.status_code == 200
        assert response.json()["run_count"] == 48
        assert response.json()["implementations"] == ["huggingface", "liger"]


@pytest.mark.django_db
class TestQueryCountsOnTheRealData:
    """Pages of very different sizes in the bundled data take the same number of queries."""

    @pytest.mark.parametrize("small, large", [("geglu", "fused_neighborhood_attention")])
    def test_kernel_pages_of_48_and_448_runs(self, client, bundled, small, large):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        counts = []
        for slug in (small, large):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(reverse("registry:kernel-detail", args=[slug])).status_code == 200
            counts.append(len(queries))
        assert counts[0] == counts[1]

    def test_export_is_one_query_for_all_runs(self, client, bundled, django_assert_num_queries):
        with django_assert_num_queries(1):
            response = client.get(reverse("export-csv"))
            assert len(b"".join(response.streaming_content).splitlines()) == 2941
