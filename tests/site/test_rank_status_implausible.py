"""Rank statements pass over an implausible #1 (a time faster than the GPU's speed of light), as
the compare link does: each run is compared with its group's best plausible run, that run with the
next plausible one, and an implausible run with none; on the run page, the kernel page and in the
API, with a fixed number of queries."""

import json

import pytest
from django.urls import reverse

from registry import rank_status, run_page, selectors
from registry.models import BenchmarkRun
from registry.rank_status import RankStatus
from tests.site.conftest import liger_rows
from tests.site.test_reference_record_pages import text_of

# GeGLU backward at T = 1024 on the A100 cannot take less than 14.2 ms (12·N·H·I FLOPs at 312
# TFLOP/s): `cheater` at 1 ms is implausible and ranked #1; the others, p20 and p80 at ±2%, have
# ranges apart: liger 30 ms (29.4–30.6), huggingface 33 (32.34–33.66), torch 36 (35.28–36.72).
MEDIANS = {"cheater": 1.0, "liger": 30.0, "huggingface": 33.0, "torch": 36.0}
WORKLOAD = {"bsz": 8, "hidden_size": 4096, "intermediate_size": 11008, "hidden_act": "gelu_pytorch_tanh"}


def rows_with(medians, **shape):
    """Liger rows of WORKLOAD (the floors above rest on it) with these medians per provider (at
    T = 1024; proportional to T beyond)."""
    rows = liger_rows(providers=tuple(medians), modes=("backward",), **{"xs": (1024,), **shape})
    for row in rows:
        median = medians[row["kernel_provider"]] * row["x_value"] / 1024
        row.update(y_value_50=median, y_value_20=median * 0.98, y_value_80=median * 1.02)
        row["extra_benchmark_config_str"] = json.dumps({**WORKLOAD, "dtype": "torch.bfloat16"})
    return rows


@pytest.fixture(autouse=True)
def no_page_cache(settings):
    settings.PAGE_CACHE_SECONDS = 0


@pytest.fixture
def group(import_rows):
    import_rows(rows_with(MEDIANS))
    runs = {run.implementation.provider: run for run in BenchmarkRun.objects.all()}
    assert [(p, r.rank, r.implausible) for p, r in sorted(runs.items(), key=lambda i: i[1].rank)] == [
        ("cheater", 1, True),
        ("liger", 2, False),
        ("huggingface", 3, False),
        ("torch", 4, False),
    ]
    return runs


def standings(runs):
    return {run.implementation.provider: run.standing for run in rank_status.attach(runs.values())}


@pytest.mark.django_db
class TestStandings:
    def test_the_implausible_first_is_compared_with_no_run(self, group):
        standing = standings(group)["cheater"]
        assert (standing.status, standing.compared, standing.difference) == (
            RankStatus.IMPLAUSIBLE,
            None,
            None,
        )
        assert standing.summary == "implausible: not compared"
        assert standing.statement.startswith(
            "implausible: not compared (faster than its GPU's speed of light)"
        )

    def test_the_best_plausible_run_is_compared_with_the_next_plausible_one(self, group):
        standing = standings(group)["liger"]
        assert (standing.status, standing.compared) == (RankStatus.AHEAD, group["huggingface"])
        # (30 − 33) / 33, between (29.4 − 33.66) / 33 and (30.6 − 32.34) / 33.
        assert standing.summary == "faster than #3 by 9.1% (5.3% to 12.9%)"
        assert standing.statement.endswith(
            "; the #1 is implausible and not compared, #2 is the best plausible run"
        )

    def test_the_others_are_compared_with_the_best_plausible_run(self, group):
        mine = standings(group)
        assert (mine["huggingface"].status, mine["huggingface"].compared) == (
            RankStatus.BEHIND,
            group["liger"],
        )
        # (33 − 30) / 30, between (32.34 − 30.6) / 30 and (33.66 − 29.4) / 30.
        assert mine["huggingface"].summary == "slower than #2 by 10.0% (5.8% to 14.2%)"
        assert (mine["torch"].status, mine["torch"].compared) == (RankStatus.BEHIND, group["liger"])
        assert mine["torch"].summary.startswith("slower than #2 by 20.0%")

    def test_each_is_compared_with_the_run_the_compare_link_goes_to(self, client, group):
        members = selectors.run_group(group["liger"])
        for run in rank_status.attach(group.values()):
            if run.implausible:
                continue
            assert run.standing.compared == selectors.group_best_other(members, run)
            response = client.get(reverse("registry:run-compare-best", args=[run.pk]))
            assert response["Location"] == reverse(
                "registry:compare", args=[run.pk, run.standing.compared_id]
            )

    def test_the_run_page_with_all_its_members_gives_the_same_standings(self, group):
        page = run_page.run_page_of(group["torch"])
        assert {m.implementation.provider: m.standing.status for m in page.members} == {
            "cheater": RankStatus.IMPLAUSIBLE,
            "liger": RankStatus.AHEAD,
            "huggingface": RankStatus.BEHIND,
            "torch": RankStatus.BEHIND,
        }
        assert group["torch"].standing.compared == group["liger"] == page.best

    def test_the_only_plausible_run_says_so(self, import_rows):
        import_rows(rows_with({"cheater": 1.0, "liger": 30.0}))
        mine = standings({run.implementation.provider: run for run in BenchmarkRun.objects.all()})
        assert (mine["liger"].status, mine["liger"].compared) == (RankStatus.ALONE, None)
        assert mine["liger"].summary == "the only plausible run in its group"
        assert mine["cheater"].status == RankStatus.IMPLAUSIBLE

    def test_a_group_of_implausible_runs_compares_none(self, import_rows):
        import_rows(rows_with({"cheater": 1.0, "liger": 2.0}))
        mine = standings({run.implementation.provider: run for run in BenchmarkRun.objects.all()})
        assert {p: s.status for p, s in mine.items()} == {
            "cheater": RankStatus.IMPLAUSIBLE,
            "liger": RankStatus.IMPLAUSIBLE,
        }


@pytest.mark.django_db
class TestPages:
    def test_the_run_page_compares_with_the_best_plausible_run(self, client, group):
        response = client.get(group["huggingface"].get_absolute_url())
        assert response.status_code == 200
        text = text_of(response)
        assert "rank 3 in its comparison group of 4 runs slower than #2 by 10.0% (5.8% to 14.2%)" in text
        html = response.content.decode()
        assert 'data-figure="rank-status" data-status="behind"' in html
        # The group table: the implausible #1 is not compared, the best plausible run is ahead.
        assert '<td class="rank-status" data-status="implausible">implausible: not compared</td>' in html
        assert (
            '<td class="rank-status" data-status="ahead">faster than #3 by 9.1% (5.3% to 12.9%)</td>' in html
        )

    def test_the_implausible_runs_page_says_it_is_not_compared(self, client, group):
        response = client.get(group["cheater"].get_absolute_url())
        assert response.status_code == 200
        assert 'data-figure="rank-status" data-status="implausible"' in response.content.decode()
        assert "rank 1 in its comparison group of 4 runs implausible: not compared" in text_of(response)

    def test_the_kernel_page_says_each_runs_standing(self, client, group):
        response = client.get(reverse("registry:kernel-detail", args=["geglu"]))
        assert response.status_code == 200
        html = response.content.decode()
        for status, count in (("implausible", 1), ("ahead", 1), ("behind", 2)):
            assert html.count(f'class="small rank-status" data-status="{status}"') == count


@pytest.mark.django_db
class TestApi:
    def test_the_implausible_run_is_compared_with_no_run(self, client, group):
        data = client.get(reverse("run-detail", args=[group["cheater"].pk])).json()
        assert (data["rank"], data["rank_status"], data["rank_compared_with"]) == (1, "implausible", None)
        assert data["rank_statement"].startswith("implausible: not compared")
        assert (data["rank_difference"], data["rank_difference_low"]) == (None, None)

    def test_the_others_are_compared_with_the_best_plausible_run(self, client, group):
        data = client.get(reverse("run-detail", args=[group["torch"].pk])).json()
        assert (data["rank_status"], data["rank_compared_with"]) == ("behind", group["liger"].pk)
        assert data["rank_difference"] == pytest.approx(36 / 30 - 1)
        best = client.get(reverse("run-detail", args=[group["liger"].pk])).json()
        assert (best["rank_status"], best["rank_compared_with"]) == ("ahead", group["huggingface"].pk)

    def test_the_group_gives_it_for_every_run(self, client, group):
        key = group["liger"].comparison_key
        members = client.get(reverse("comparison-group-detail", args=[key])).json()["runs"]
        assert [m["rank_status"] for m in members] == ["implausible", "ahead", "behind", "behind"]


@pytest.mark.django_db
class TestQueries:
    def test_standings_take_one_query_whatever_the_number_of_groups(
        self, import_rows, django_assert_num_queries
    ):
        # 2 GPUs × 4 sequence lengths: 8 groups, each with an implausible #1.
        import_rows(rows_with(MEDIANS, xs=(1024, 2048, 4096, 8192), gpus=2))
        assert BenchmarkRun.objects.filter(rank=1, implausible=True).count() == 8
        assert not BenchmarkRun.objects.filter(rank__gt=1, implausible=True).exists()
        runs = BenchmarkRun.objects.public().order_by("comparison_key", "rank")
        few, many = list(runs[:2]), list(runs)  # an implausible #1 and its group's best plausible run
        assert len(many) == 32
        for runs in (few, many):
            with django_assert_num_queries(1):
                rank_status.attach(runs)
        assert {run.standing.status for run in many} == {
            RankStatus.IMPLAUSIBLE,
            RankStatus.AHEAD,
            RankStatus.BEHIND,
        }
        assert all(run.standing.compared is None or not run.standing.compared.implausible for run in many)
