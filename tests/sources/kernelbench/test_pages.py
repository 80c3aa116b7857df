import re

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.sources.kernelbench.services import kernelbench_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(kb_folder):
    kernelbench_import(path=kb_folder)
    return BenchmarkRun.objects.filter(source__slug="kernelbench")


def matmul_eager(imported):
    return imported.get(median=1.1)


class TestTheRunPage:
    def test_shows_mean_std_min_max_and_trials_and_no_quantiles(self, client, imported):
        run = matmul_eager(imported)
        page = client.get(run.get_absolute_url())
        assert page.status_code == 200
        html = page.content.decode()
        assert "Mean latency" in html
        for figure, value in (
            ("mean", "1.1"),
            ("std", "0.01"),
            ("min", "1.045"),
            ("max", "1.21"),
            ("num-trials", "100"),
        ):
            assert re.search(rf'data-figure="{figure}">{re.escape(value)}<', html), figure
        measurements = html.split('id="measurements"')[1].split("</section>")[0]
        assert "p20" not in measurements.replace("no p20", "")
        assert "95% Student's t interval of the mean" in html

    def test_shows_the_problem_file_the_implementation_and_the_gpu(self, client, imported):
        run = matmul_eager(imported)
        html = client.get(run.get_absolute_url()).content.decode()
        assert 'data-field="problem-text"' in html and "return torch.matmul(A, B)" in html
        assert run.workload.spec["problem"]["sha256"] in html
        assert "NVIDIA L40S" in html and "eager" in html
        # The shapes read from the syntax tree.
        assert "[4096, 4096]" in html

    def test_the_rank_interval_is_the_t_interval_of_the_mean(self, client, imported):
        from scipy import stats

        run = matmul_eager(imported)
        data = client.get(f"/api/v1/runs/{run.pk}/").json()
        low, high = stats.t.interval(0.95, 99, loc=1.1, scale=0.01 / 10)
        assert data["rank_interval_basis"] == "mean-t95"
        assert data["rank_interval_low"] == pytest.approx(low) and data[
            "rank_interval_high"
        ] == pytest.approx(high)
        assert data["statistic"] == "mean" and data["p20"] is None and data["p80"] is None
        assert data["source_metrics"] == {
            "mean": 1.1,
            "std": 0.01,
            "min": 1.045,
            "max": 1.21,
            "num_trials": 100,
        }


class TestTheApi:
    def test_runs_filter_by_source(self, client, imported, site_runs):
        kb = client.get("/api/v1/runs/?source=kernelbench&page_size=100").json()
        liger = client.get("/api/v1/runs/?source=liger-kernel&page_size=100").json()
        assert kb["count"] == imported.count() == 7
        assert {r["source"] for r in kb["results"]} == {"kernelbench"}
        assert liger["count"] == site_runs and {r["source"] for r in liger["results"]} == {"liger-kernel"}

    def test_the_manifest_states_what_the_source_published(self, client, imported):
        run = matmul_eager(imported)
        manifest = client.get(reverse("manifest-detail", args=[run.digest])).json()
        results = manifest["items"][0]["spec"]["results"]
        assert results["statistic"] == "mean" and "p20" not in results


class TestTheProblemPage:
    def test_shows_gpus_by_configurations_with_speedup_over_eager(self, client, imported):
        kernel = matmul_eager(imported).kernel
        html = client.get(kernel.get_absolute_url()).content.decode()
        assert "GPUs × configurations" in html and 'data-figure="speedup-chart"' in html
        table = html.split('data-table="speedups"')[1].split("</table>")[0]
        assert "compile-inductor-default" in table and "NVIDIA L40S" in table
        # eager 1.1 ms / compile 0.9 ms on the L40S.
        assert 'data-speedup="1.222"' in table


class TestSearch:
    @pytest.mark.parametrize("query", ["L1 #19", "level1 19", "19_ReLU.py", "ReLU", "kernelbench 19"])
    def test_finds_a_problem_by_name_and_number(self, client, imported, query):
        html = client.get("/search/", {"q": query}).content.decode()
        assert "KernelBench L1 #19: ReLU" in html
        assert "KernelBench L1 #1: Square" not in html


class TestCompare:
    def test_a_liger_and_a_kernelbench_run_are_not_comparable_and_the_page_says_why(
        self, client, imported, site_runs
    ):
        kb = matmul_eager(imported)
        liger = BenchmarkRun.objects.filter(source__slug="liger-kernel").first()
        html = client.get(reverse("registry:compare", args=[liger.pk, kb.pk])).content.decode()
        assert 'data-comparable="no"' in html
        notice = html.split('data-notice="sources-apart"')[1].split("</p>")[0]
        assert "Liger-Kernel benchmarks" in notice and "KernelBench reference timings" in notice
        assert "do_bench" in notice and "no L2 flush" in notice
