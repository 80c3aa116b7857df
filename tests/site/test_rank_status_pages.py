"""Ranks with their uncertainty on the pages and in the API (issue 14): the run page and its group
table, the kernel page, the compare page's ratio with its interval, the run API's fields and its
schema, each with a fixed number of queries; controlled runs judged on their samples."""

import pytest
from django.urls import reverse

from registry import rank_status
from registry.models import BenchmarkRun, Metric
from registry.rank_status import IntervalBasis, RankStatus
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.reruns.models import JobKind, RerunJob
from registry.stats import medians as stats
from tests.site.conftest import liger_rows
from tests.site.test_reference_record_pages import text_of

# Medians x/100 + provider index + 1 (backward), p20 and p80 at ±2%: at x = 1024, liger 11.24 ms
# (11.015–11.465), huggingface 12.24 (11.995–12.485), torch 13.24: ranges apart, in that order.
ROWS = {"providers": ("liger", "huggingface", "torch"), "xs": (1024, 2048), "modes": ("backward",)}


@pytest.fixture(autouse=True)
def no_page_cache(settings):
    settings.PAGE_CACHE_SECONDS = 0


@pytest.fixture
def group(import_rows):
    import_rows(liger_rows(**ROWS))
    runs = BenchmarkRun.objects.filter(workload__x_value=1024).order_by("rank")
    return {run.implementation.provider: run for run in runs}


@pytest.mark.django_db
class TestRunPage:
    def test_it_says_how_far_behind_the_first_and_the_group_table_says_each_runs_standing(
        self, client, group
    ):
        response = client.get(group["huggingface"].get_absolute_url())
        assert response.status_code == 200
        text = text_of(response)
        # (12.24 − 11.24) / 11.24, between (11.995 − 11.465) / 11.24 and (12.485 − 11.015) / 11.24.
        assert "rank 2 in its comparison group of 3 runs slower than #1 by 8.9% (4.7% to 13.1%)" in text
        assert "#1: the p20–p80 range 11.02–11.46 ms" in text
        html = response.content.decode()
        assert 'data-figure="rank-status" data-status="behind"' in html
        # The table: (11.24 − 12.24) / 12.24 for the #1, against its #2.
        assert "faster than #2 by 8.2% (4.3% to 12.0%)" in text
        assert html.count('<td class="rank-status" data-status="behind">') == 2

    def test_the_first_run_page_says_faster_than_the_second(self, client, group):
        response = client.get(group["liger"].get_absolute_url())
        assert response.status_code == 200
        assert 'data-figure="rank-status" data-status="ahead"' in response.content.decode()
        assert "faster than #2 by 8.2%" in text_of(response)


@pytest.mark.django_db
class TestKernelPage:
    def test_every_ranked_run_on_the_page_says_its_standing(self, client, group):
        response = client.get(reverse("registry:kernel-detail", args=["geglu"]))
        assert response.status_code == 200
        html = response.content.decode()
        assert html.count('class="small rank-status" data-status="ahead"') == 2  # one #1 per group
        assert html.count('class="small rank-status" data-status="behind"') == 4
        assert "slower than #1 by 8.9% (4.7% to 13.1%)" in text_of(response)


@pytest.mark.django_db
class TestCompareRatio:
    def test_the_ratio_of_the_medians_has_the_interval_the_two_ranges_allow(self, client, group):
        a, b = group["huggingface"], group["liger"]
        response = client.get(reverse("registry:compare", args=[a.pk, b.pk]))
        assert response.status_code == 200
        ratio = response.context["ratio"]
        assert ratio.value == pytest.approx(11.24 / 12.24)
        # B's range against A's: 1 + (11.015 − 12.485) / 12.24 to 1 + (11.465 − 11.995) / 12.24.
        assert (ratio.low, ratio.high) == (
            pytest.approx(1 - 1.4696 / 12.24),
            pytest.approx(1 - 0.5304 / 12.24),
        )
        text = text_of(response)
        assert "Ratio B / A 0.918 interval 0.880–0.957: the two medians' ranges combined" in text
        assert "What the data supports slower than #1 by 8.9%" in text

    def test_single_calls_give_a_ratio_without_an_interval(self, import_rows):
        rows = liger_rows(providers=("liger", "huggingface"), xs=(1024,), modes=("backward",))
        for row in rows:
            row["y_value_20"] = row["y_value_80"] = row["y_value_50"]
        import_rows(rows)
        a, b = BenchmarkRun.objects.order_by("-rank")
        ratio = rank_status.medians_ratio(a, b)
        assert ratio.value == pytest.approx(b.median / a.median)
        assert (ratio.low, ratio.high) == (None, None)
        assert "one timed call" in ratio.how


@pytest.mark.django_db
class TestApi:
    def test_the_run_gives_its_status_interval_and_gap(self, client, group):
        response = client.get(reverse("run-detail", args=[group["huggingface"].pk]))
        assert response.status_code == 200
        data = response.json()
        assert data["rank_status"] == "behind"
        assert data["rank_statement"].startswith("slower than #1 by 8.9%")
        assert (data["rank_interval_low"], data["rank_interval_high"]) == (
            pytest.approx(12.24 * 0.98),
            pytest.approx(12.24 * 1.02),
        )
        assert data["rank_interval_basis"] == "p20-p80"
        assert data["rank_compared_with"] == group["liger"].pk
        assert data["rank_difference"] == pytest.approx(1 / 11.24)
        assert data["rank_difference_low"] < data["rank_difference"] < data["rank_difference_high"]

    def test_the_list_and_the_group_give_it_for_every_run(self, client, group):
        runs = client.get(reverse("run-list") + "?kernel=geglu&page_size=50").json()["results"]
        assert {r["rank_status"] for r in runs} == {"ahead", "behind"}
        key = group["liger"].comparison_key
        members = client.get(reverse("comparison-group-detail", args=[key])).json()["runs"]
        assert [m["rank_status"] for m in members] == ["ahead", "behind", "behind"]

    def test_the_schema_documents_the_fields(self, client):
        schema = client.get(reverse("api-schema") + "?format=json").json()
        run = schema["components"]["schemas"]["Run"]["properties"]
        assert {"rank_status", "rank_statement", "rank_interval_low", "rank_difference_high"} <= set(run)
        statuses = schema["components"]["schemas"][run["rank_status"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
        assert set(statuses["enum"]) == set(RankStatus.values)


@pytest.mark.django_db
class TestQueries:
    def test_standings_of_any_number_of_source_runs_take_one_query(
        self, import_rows, django_assert_num_queries
    ):
        import_rows(liger_rows(**{**ROWS, "xs": (1024, 2048, 4096, 8192), "gpus": 3}))
        few, many = (list(BenchmarkRun.objects.public().order_by("pk")[:n]) for n in (2, 36))
        for runs in (few, many):
            with django_assert_num_queries(1):
                rank_status.attach(runs)
        assert {RankStatus.AHEAD, RankStatus.BEHIND} <= {run.standing.status for run in many}


@pytest.mark.django_db
class TestControlledRuns:
    @pytest.fixture
    def controlled(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
        runs = list(BenchmarkRun.objects.public().current().filter(metric=Metric.LATENCY).order_by("pk"))
        return rank_status.attach(runs)

    def test_their_interval_is_the_95_percent_interval_of_the_median_of_their_samples(self, controlled):
        jobs = {j.result_run_id: j for j in RerunJob.objects.filter(kind=JobKind.MEASURE)}
        sampled = [run for run in controlled if len(jobs[run.pk].samples) >= 10]
        assert sampled
        for run in sampled:
            expected = stats.median_interval(jobs[run.pk].samples)
            assert run.standing.spread.basis == IntervalBasis.MEDIAN_CI
            assert (run.standing.spread.low, run.standing.spread.high) == pytest.approx(expected)

    def test_standings_take_two_queries(self, controlled, django_assert_num_queries):
        with django_assert_num_queries(2):
            rank_status.attach(controlled)

    def test_the_compare_ratio_is_a_bootstrap_over_both_runs_samples(self, client, controlled):
        ranked = [run for run in controlled if run.standing.compared is not None and run.rank > 1]
        run = next(r for r in ranked if r.standing.spread.basis == IntervalBasis.MEDIAN_CI)
        first = run.standing.compared
        response = client.get(reverse("registry:compare", args=[first.pk, run.pk]))
        assert response.status_code == 200
        ratio = response.context["ratio"]
        # Timed calls are resampled in consecutive batches (stats.batch_medians); memory peaks singly.
        batches = (
            "bootstrap over the medians of "
            if run.metric == "latency"
            else "bootstrap over both sides' samples"
        )
        assert ratio.how.startswith(batches), ratio.how
        assert ratio.value == pytest.approx(run.median / first.median)
        assert ratio.low < ratio.value < ratio.high
