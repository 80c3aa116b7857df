"""The kernel page reads a bounded amount whatever the kernel's size, and shows what it showed when
it read everything: the same runs on each page, the same charts, the same filter choices. On a
synthetic registry of 2,300 runs over 20 GPUs, where a kernel has more chart panels than are drawn."""

import pytest
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count
from django.urls import reverse

from bench import generate
from registry import charts, selectors
from registry.models import BenchmarkRun, Kernel

RUNS = 2300
# The kernel page's default order on the spec rows themselves: the page sorts on the run's copies
# of them (services.run_keys) and must give exactly this order.
JOINED_ORDER = (
    "environment__product",
    "operation_mode",
    "metric",
    "implementation__provider",
    "workload__x_value",
    "id",
)


@pytest.fixture(scope="module")
def grown(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), transaction.atomic():
        generate.registry_grow(RUNS, workers=1, log=lambda _: None)
        yield
        transaction.set_rollback(True)


@pytest.fixture
def kernel(grown, db):
    """The kernel with the most runs."""
    return Kernel.objects.annotate(runs_count=Count("runs")).order_by("-runs_count", "pk").first()


def drawn_points(current, kernel, *, limit=charts.MAX_PANELS, max_points=charts.MAX_CHART_POINTS):
    """The kernel page's chart points, as its view reads them."""
    return selectors.chart_points_drawn(
        current, kernel=kernel, order=charts.panel_order, limit=limit, max_points=max_points
    )


def _page_ids(client, kernel, **query):
    response = client.get(reverse("registry:kernel-detail", args=[kernel.slug]), query)
    assert response.status_code == 200
    return response, [run.pk for run in response.context["page"].object_list]


class TestPagesHoldTheSameRuns:
    @pytest.mark.parametrize("page", ["1", "2", "last"])
    def test_default_order_pages_equal_sorting_whole_rows(self, client, kernel, page):
        response, ids = _page_ids(client, kernel, page=page)
        runs = BenchmarkRun.objects.public().filter(kernel=kernel)
        expected = Paginator(runs.order_by(*JOINED_ORDER), 50).get_page(page)
        assert ids == [run.pk for run in expected.object_list]
        assert len(ids) > 0
        assert response.context["page"].paginator.count == runs.count()

    def test_a_sorted_filtered_page_equals_sorting_whole_rows(self, client, kernel):
        _, ids = _page_ids(client, kernel, sort="-median", operation_mode="forward", page="2")
        runs = BenchmarkRun.objects.public().filter(kernel=kernel, operation_mode="forward")
        expected = Paginator(runs.order_by("-median", "id"), 50).get_page(2)
        assert ids == [run.pk for run in expected.object_list]


class TestChartsAndChoices:
    def test_charts_equal_those_drawn_from_every_point(self, client, kernel):
        response = client.get(reverse("registry:kernel-detail", args=[kernel.slug]))
        assert response.status_code == 200
        current = BenchmarkRun.objects.public().filter(kernel=kernel).current()
        panels, omitted = charts.panels_build(selectors.chart_points(current))
        assert len(panels) > 4
        assert response.context["panels"] == panels
        assert response.context["omitted_panels"] == omitted

    def test_only_the_drawn_panels_points_are_read_and_they_make_the_same_charts(self, kernel):
        current = BenchmarkRun.objects.public().filter(kernel=kernel).current()
        every_point = selectors.chart_points(current)
        points, omitted = drawn_points(current, kernel, limit=4)
        assert len(points) < len(every_point)
        assert charts.panels_build(points, limit=4)[0] == charts.panels_build(every_point, limit=4)[0]
        assert omitted == charts.panels_build(every_point, limit=4)[1] > 0

    def test_the_points_query_reads_at_most_one_row_over_the_budget(self, kernel):
        current = BenchmarkRun.objects.public().filter(kernel=kernel).current()
        points, _ = drawn_points(current, kernel)
        assert len(points) > 6
        over, _ = drawn_points(current, kernel, max_points=5)
        assert len(over) == 6

    def test_a_selection_over_the_point_budget_draws_no_chart_and_says_so(
        self, client, kernel, monkeypatch, settings
    ):
        settings.PAGE_CACHE_SECONDS = 0  # the same URL is asked twice, under two budgets
        current = BenchmarkRun.objects.public().filter(kernel=kernel).current()
        drawn = len(drawn_points(current, kernel)[0])
        url = reverse("registry:kernel-detail", args=[kernel.slug])

        monkeypatch.setattr(charts, "MAX_CHART_POINTS", drawn - 1)
        response = client.get(url)
        assert response.status_code == 200
        assert response.context["panels"] == []
        html = response.content.decode()
        assert f"More than {drawn - 1:,} chart points match" in html
        assert "<svg" not in html
        assert len(response.context["page"].object_list) == 50  # the runs table is still there

        monkeypatch.setattr(charts, "MAX_CHART_POINTS", drawn)
        response = client.get(url)
        assert len(response.context["panels"]) > 4
        assert "chart points match" not in response.content.decode()

    def test_filter_choices_equal_a_distinct_over_the_kernels_runs(self, kernel):
        choices = selectors.kernel_filter_choices(kernel)
        runs = BenchmarkRun.objects.filter(kernel=kernel)
        gpus = set(runs.values_list("environment__slug", "environment__product").distinct())
        assert choices["gpus"] == sorted(gpus, key=lambda g: g[1])
        assert len(choices["gpus"]) > 1
        providers = set(runs.values_list("implementation__provider", flat=True).distinct())
        assert choices["implementations"] == sorted(providers)
        dtypes = set(runs.exclude(workload__dtype="").values_list("workload__dtype", flat=True).distinct())
        assert choices["dtypes"] == sorted(dtypes)
