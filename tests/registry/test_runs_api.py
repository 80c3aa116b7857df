"""The read API of the foundation: filters, pagination with a total count, one run."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.sources.liger.services import liger_import
from registry.sources.liger.tasks import liger_import_task
from tests.registry.csvdata import bundled_rows, write_csv
from tests.site.test_api import CONTRACT_FIELDS

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(tmp_path):
    rows = bundled_rows("geglu") + bundled_rows("swiglu")
    liger_import(path=write_csv(tmp_path / "v1.csv", rows))
    liger_import(path=write_csv(tmp_path / "v2.csv", rows[1:]))  # withdraws the first row
    return rows


class TestRunList:
    def test_filters_by_kernel_with_a_total_count(self, client, runs):
        body = client.get(reverse("run-list"), {"kernel": "swiglu"}).json()
        assert (
            body["count"]
            == len(bundled_rows("swiglu"))
            == BenchmarkRun.objects.filter(kernel__slug="swiglu").count()
        )
        assert {r["kernel"] for r in body["results"]} == {"swiglu"}

    def test_filters_by_withdrawn(self, client, runs):
        body = client.get(reverse("run-list"), {"withdrawn": "true"}).json()
        assert body["count"] == 1
        assert body["results"][0]["withdrawn"] is True

    def test_filters_by_evidence_level(self, client, runs):
        assert client.get(reverse("run-list"), {"evidence_level": "reported"}).json()["count"] == len(runs)
        assert client.get(reverse("run-list"), {"evidence_level": "reproduced"}).json()["count"] == 0

    def test_list_is_paginated(self, client, runs):
        body = client.get(reverse("run-list")).json()
        assert body["count"] == len(runs)
        assert len(body["results"]) == 50 and body["next"]

    def test_list_query_count_does_not_grow_with_the_page(self, client, runs):
        counts = []
        for size in (5, 50):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(reverse("run-list"), {"page_size": size}).status_code == 200
            counts.append(len(queries))
        # the count, the page, and the page's controlled-run jobs in two prefetches
        assert counts[0] == counts[1] <= 5, counts


class TestRunDetail:
    def test_detail_has_the_fields_of_the_contract(self, client, runs):
        run = BenchmarkRun.objects.filter(withdrawn=False).first()
        body = client.get(reverse("run-detail", args=[run.pk])).json()
        assert CONTRACT_FIELDS <= body.keys(), CONTRACT_FIELDS - body.keys()
        assert body["digest"] == run.digest
        assert body["url"] == run.get_absolute_url()

    def test_unknown_run_is_404(self, client, runs):
        assert client.get(reverse("run-detail", args=[10**9])).status_code == 404


class TestImportTask:
    def test_task_runs_the_same_service(self, tmp_path):
        path = write_csv(tmp_path / "t.csv", bundled_rows("geglu")[:10])
        result = liger_import_task.apply(args=[path]).get()
        assert result["created"] == 10
        assert liger_import_task.apply(args=[path]).get()["unchanged"] == 10
        assert BenchmarkRun.objects.count() == 10
