"""Each run's speed of light: the reference record's percentage of the A100's, a synthetic run
faster than the hardware allows flagged implausible everywhere and never the best, a peak below
the memory floor, measured ceilings beside the datasheet's, and the API's fields."""

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.reruns.models import MeasuredCeiling
from registry.reruns.services.measured_ceilings import measured_ceiling_create
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows, write_csv

REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)
A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
# The reference workload's backward: 12·N·H·I FLOPs at 312 TFLOP/s (bf16, dense) is 113.65 ms,
# 78.8% of the recorded 144.21 ms; its bytes take 1.06 ms at 2,039 GB/s.
REFERENCE_FLOOR_MS = 12 * 65536 * 4096 * 11008 / 312e12 * 1e3


def _reference_row(rows):
    return next(
        r
        for r in rows
        if (r["kernel_provider"], r["kernel_operation_mode"], r["metric_name"], r["x_value"])
        == ("huggingface", "backward", "speed", "8192")
    )


@pytest.fixture
def geglu_a100(tmp_path, db):
    """GeGLU's A100 rows as bundled, and a synthetic `cheater` whose backward at the reference
    workload takes 1 ms and whose full pass peaks at 1 MB: both impossible."""
    rows = bundled_rows("geglu")
    cheater = {**_reference_row(rows), "kernel_provider": "cheater"}
    cheater.update(y_value_50="1.0", y_value_20="1.0", y_value_80="1.0")
    memory = next(r for r in rows if r["metric_name"] == "memory" and r["x_value"] == "8192")
    low_peak = {
        **memory,
        "kernel_provider": "cheater",
        "y_value_50": "1.0",
        "y_value_20": "1.0",
        "y_value_80": "1.0",
    }
    liger_import(path=write_csv(tmp_path / "geglu.csv", [*rows, cheater, low_peak]))
    return {
        "reference": BenchmarkRun.objects.get(external_id=REFERENCE_ID),
        "cheater": BenchmarkRun.objects.get(
            provider="cheater", operation_mode="backward", metric="latency", x_value=8192
        ),
        "low_peak": BenchmarkRun.objects.get(provider="cheater", metric="memory"),
    }


class TestReferenceRecord:
    def test_its_percentage_of_the_a100s_speed_of_light_is_stored(self, geglu_a100):
        run = geglu_a100["reference"]
        assert run.sol_percent == pytest.approx(100 * REFERENCE_FLOOR_MS / 144.2132110595703)
        assert round(run.sol_percent, 1) == 78.8
        assert (run.implausible, run.sol_percent_measured) == (False, None)
        datasheet = run.speed_of_light["ceilings"][0]
        assert (datasheet["kind"], datasheet["bound"], datasheet["tflops"]) == ("datasheet", "compute", 312)

    def test_its_page_shows_the_percentage_with_the_formulas_figures(self, client, geglu_a100):
        response = client.get(geglu_a100["reference"].get_absolute_url())
        assert response.status_code == 200
        page = response.content.decode()
        assert "78.8% of the NVIDIA A100 SXM4 80GB's speed of light" in page
        assert "2151677952 bytes" in page  # bytes
        assert "35.46 TFLOP (35459249995776)" in page  # FLOPs
        assert f'href="{A100_DATASHEET}"' in page  # the ceiling's source
        assert "113.6514 ms" in page  # the floor


class TestImplausibleRun:
    def test_a_time_faster_than_the_hardware_is_flagged_and_keeps_its_level(self, geglu_a100):
        cheater = geglu_a100["cheater"]
        assert cheater.implausible
        assert cheater.sol_percent == pytest.approx(100 * REFERENCE_FLOOR_MS / 1.0)
        assert (cheater.evidence_level, cheater.rank) == ("reported", 1)

    def test_a_peak_below_the_inputs_size_is_flagged(self, geglu_a100):
        low_peak = geglu_a100["low_peak"]
        # x [8, 8192, 4096] and three [11008, 4096] weights in bf16 are 774 MiB before the pass starts
        floor_mib = (8 * 8192 * 4096 + 3 * 11008 * 4096) * 2 / 2**20
        assert low_peak.speed_of_light["floor_mib"] == pytest.approx(floor_mib)
        assert low_peak.implausible

    def test_it_is_not_the_run_to_compare_with(self, client, geglu_a100):
        reference, cheater = geglu_a100["reference"], geglu_a100["cheater"]
        liger = BenchmarkRun.objects.get(comparison_key=reference.comparison_key, provider="liger")
        page = client.get(reference.get_absolute_url()).content.decode()
        assert reverse("registry:compare", args=[reference.pk, liger.pk]) in page
        assert reverse("registry:compare", args=[reference.pk, cheater.pk]) not in page
        response = client.get(reverse("registry:run-compare-best", args=[reference.pk]))
        assert response.status_code == 302
        assert response["Location"] == reverse("registry:compare", args=[reference.pk, liger.pk])

    def test_the_kernel_page_sorted_best_first_lists_it_last_and_marks_it(self, client, geglu_a100):
        url = reverse("registry:kernel-detail", args=["geglu"])
        response = client.get(url, {"sort": "median", "metric": "latency", "operation_mode": "backward"})
        assert response.status_code == 200
        runs = list(response.context["page"].object_list)
        assert runs[-1].pk == geglu_a100["cheater"].pk
        assert not any(run.implausible for run in runs[:-1])
        assert 'class="badge implausible"' in response.content.decode()

    def test_its_own_page_says_implausible(self, client, geglu_a100):
        page = client.get(geglu_a100["cheater"].get_absolute_url()).content.decode()
        assert 'data-figure="implausible"' in page
        assert "faster than the GPU's speed of light" in page

    def test_moderators_find_it_in_the_admin(self, moderator_client, geglu_a100):
        url = reverse("admin:registry_benchmarkrun_changelist")
        response = moderator_client.get(url, {"implausible__exact": "1"})
        assert response.status_code == 200
        listed = {run.pk for run in response.context["cl"].result_list}
        assert listed == {geglu_a100["cheater"].pk, geglu_a100["low_peak"].pk}


class TestMeasuredCeilings:
    def test_a_measured_ceiling_gives_each_run_of_that_gpu_a_second_percentage(self, client, geglu_a100):
        measured_ceiling_create(
            document={
                "format": "kernelindex-ceilings/v1",
                "gpu": "nvidia-a100-sxm4-80gb",
                "gpu_name": "NVIDIA A100-SXM4-80GB",
                "measured_at": "2026-12-01T00:00:00+00:00",
                "memory_bandwidth": {"median": 1800.0, "ci95": [1790.0, 1810.0]},
                "bf16_dense": {"median": 280.0, "ci95": [279.0, 281.0]},
            }
        )
        run = BenchmarkRun.objects.get(pk=geglu_a100["reference"].pk)
        floor_ms = 12 * 65536 * 4096 * 11008 / 280e12 * 1e3
        assert run.sol_percent_measured == pytest.approx(100 * floor_ms / run.median)
        assert round(run.sol_percent, 1) == 78.8  # the datasheet's is unchanged
        page = client.get(run.get_absolute_url()).content.decode()
        assert 'data-figure="sol-percent-measured"' in page
        assert MeasuredCeiling.objects.get().gpu_slug == "nvidia-a100-sxm4-80gb"


class TestApi:
    def test_the_run_carries_its_speed_of_light(self, client, geglu_a100):
        body = client.get(reverse("run-detail", args=[geglu_a100["reference"].pk])).json()
        sol = body["speed_of_light"]
        assert (sol["countable"], sol["dtype"], sol["flops"]) == (True, "bf16", 35_459_249_995_776)
        assert sol["ceilings"][0]["bandwidth_source"] == A100_DATASHEET
        assert round(body["sol_percent"], 1) == 78.8
        assert body["implausible"] is False

    def test_runs_filter_on_implausible(self, client, geglu_a100):
        body = client.get(reverse("run-list"), {"implausible": "true"}).json()
        assert {r["id"] for r in body["results"]} == {geglu_a100["cheater"].pk, geglu_a100["low_peak"].pk}

    def test_the_schema_documents_the_fields(self, client):
        schema = client.get(reverse("api-schema")).content.decode()
        assert "SpeedOfLight" in schema
        assert "sol_percent_measured" in schema


class TestKernelPageCharts:
    def test_the_charts_can_show_the_percentage_of_the_speed_of_light(self, client, geglu_a100):
        url = reverse("registry:kernel-detail", args=["geglu"])
        query = {"metric": "latency", "operation_mode": "backward", "implementation": "huggingface"}
        by_time = client.get(url, query)
        by_sol = client.get(url, {**query, "chart": "sol"})
        assert (by_time.status_code, by_sol.status_code) == (200, 200)
        assert by_time.context["panels"][0].unit == "ms"
        panel = by_sol.context["panels"][0]
        assert panel.unit == "% of speed of light"
        point = next(p for s in panel.series for p in s.points if p.run_id == geglu_a100["reference"].pk)
        assert round(point.median, 1) == 78.8
        assert point.p20 <= point.median <= point.p80
        assert 'name="chart" value="sol"' in by_sol.content.decode()  # the filters keep the toggle


class TestShippedH200Ceilings:
    def test_the_h200_runs_show_the_datasheet_and_the_measured_percentage(self, client, db):
        from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
        from registry.reruns.services.measured_ceilings import measured_ceilings_load

        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)
        assert measured_ceilings_load() == 1
        ceiling = MeasuredCeiling.objects.get(gpu_slug="nvidia-h200")
        assert 0 < ceiling.memory_bandwidth < 4800 and 0 < ceiling.bf16_tflops < 989.5
        counted = BenchmarkRun.objects.filter(environment__slug="nvidia-h200", metric="latency").exclude(
            sol_percent=None
        )
        assert counted.count() > 100
        assert not counted.filter(sol_percent_measured=None).exists()
        run = counted.filter(kernel__slug="geglu", operation_mode="backward").first()
        page = client.get(run.get_absolute_url()).content.decode()
        assert 'data-figure="sol-percent-datasheet"' in page
        assert 'data-figure="sol-percent-measured"' in page
