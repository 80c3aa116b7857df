"""The benchmarked pages and endpoints take as many SQL queries on a registry of 2,300 synthetic
runs (20 GPUs' worth of specs, four Liger versions, superseded runs) as on one of 300."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench import generate
from registry.models import BenchmarkRun

SMALL, LARGE = 300, 2300


def _pages() -> dict[str, str]:
    """The benchmark's pages, for the registry's first current run and the #1 of its group. A
    current run at both sizes: a superseded one is unranked and needs no look at its group, so
    the larger registry's first run (superseded there) would take one query fewer for a reason
    that is not the registry's size."""
    run = BenchmarkRun.objects.current().order_by("pk").first()
    best = (
        BenchmarkRun.objects.current()
        .filter(comparison_key=run.comparison_key)
        .order_by("rank", "pk")
        .first()
    )
    return {
        "run page": reverse("registry:run-detail", args=[run.pk]),
        "compare page": reverse("registry:compare", args=[run.pk, best.pk]),
        "kernel page": reverse("registry:kernel-detail", args=[run.kernel.slug]),
        "API runs of a kernel": reverse("run-list") + f"?kernel={run.kernel.slug}",
        "API run": reverse("run-detail", args=[run.pk]),
        "CSV export": reverse("export-csv"),
        "JSON Lines export": reverse("export-jsonl"),
    }


def _get(client, url):
    response = client.get(url)
    if response.streaming:
        b"".join(response.streaming_content)
    return response


def _grow(rows: int) -> None:
    generate.registry_grow(rows, workers=1, log=lambda _: None)


@pytest.mark.django_db
class TestQueriesStayConstantAsTheRegistryGrows:
    def test_each_benchmarked_page_takes_the_same_queries_at_300_and_2300_runs(
        self, client, django_assert_num_queries, settings
    ):
        settings.PAGE_CACHE_SECONDS = 0  # count rendering, not a stored copy (tests/site/test_page_cache.py)
        small = {}
        with transaction.atomic():
            _grow(SMALL)
            for page, url in _pages().items():
                _get(client, url)  # warm: per-process lookups are not per page
                with CaptureQueriesContext(connection) as queries:
                    response = _get(client, url)
                assert response.status_code == 200, page
                small[page] = len(queries)
            transaction.set_rollback(True)

        _grow(LARGE)
        assert BenchmarkRun.objects.count() == LARGE
        assert BenchmarkRun.objects.filter(superseded_by__isnull=False).exists()
        for page, url in _pages().items():
            _get(client, url)
            with django_assert_num_queries(small[page]):
                response = _get(client, url)
            assert response.status_code == 200, page
