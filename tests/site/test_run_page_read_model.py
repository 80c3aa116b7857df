"""The run page and the run API read one object, registry.run_page.RunPage, built once per request
in a fixed number of queries, whatever the size of the run's group and the number of its jobs."""

from unittest import mock

import pytest
from django.urls import reverse

from registry import run_page
from registry.models import BenchmarkRun
from registry.rank_status import IntervalBasis
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from tests.site.conftest import liger_rows
from tests.site.test_controlled_evidence import job_for, rerun

# The run; its group with the rows it replaced; its jobs; the samples of the group's other
# controlled runs (for their rank intervals); on the page also its series and its attestations.
PAGE_QUERIES = 6
API_QUERIES = 4

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_page_cache(settings):
    settings.PAGE_CACHE_SECONDS = 0  # count what a request reads, not a stored copy


@pytest.fixture
def controlled_run():
    """A shipped controlled run of a group of controlled runs."""
    controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
    runs = BenchmarkRun.objects.current().filter(source__slug="kernelindex-controlled", group_size__gte=2)
    return runs.order_by("pk").first()


def urls(run) -> dict[str, str]:
    return {"page": run.get_absolute_url(), "api": reverse("run-detail", args=[run.pk])}


class TestOneBuildPerRequest:
    @pytest.mark.parametrize("kind", ["page", "api"])
    def test_the_page_and_the_api_build_the_read_model_once(self, client, controlled_run, kind):
        with mock.patch.object(run_page, "run_page_of", wraps=run_page.run_page_of) as build:
            assert client.get(urls(controlled_run)[kind]).status_code == 200
        assert build.call_count == 1

    def test_the_api_shows_the_standing_and_evidence_the_page_read(self, client, controlled_run):
        page = run_page.run_page_of(BenchmarkRun.objects.public().get(pk=controlled_run.pk))
        data = client.get(urls(controlled_run)["api"]).json()
        assert data["rank_status"] == page.run.standing.status
        assert data["rank_compared_with"] == (page.best.pk if page.best else None)
        assert data["rank_interval_basis"] == IntervalBasis.MEDIAN_CI
        assert data["measurement"]["job"] == page.controlled.measurement.job.pk
        assert [r["job"] for r in data["reruns"]] == [r.job.pk for r in page.controlled.reruns]


class TestQueries:
    def test_a_controlled_run_takes_as_many_queries_with_more_jobs(
        self, client, controlled_run, django_assert_num_queries
    ):
        for kind, count in (("page", PAGE_QUERIES), ("api", API_QUERIES)):
            with django_assert_num_queries(count):
                assert client.get(urls(controlled_run)[kind]).status_code == 200
        for _ in range(3):
            rerun(controlled_run, count=30)
        job_for(controlled_run, kind="rerun", run=controlled_run, state="queued")
        for kind, count in (("page", PAGE_QUERIES), ("api", API_QUERIES)):
            with django_assert_num_queries(count):
                assert client.get(urls(controlled_run)[kind]).status_code == 200

    def test_a_source_run_reads_no_samples(self, client, import_rows, django_assert_num_queries):
        import_rows(liger_rows(providers=("liger", "huggingface", "torch"), xs=(1024,), modes=("backward",)))
        run = BenchmarkRun.objects.get(implementation__provider="torch")
        for kind, count in (("page", PAGE_QUERIES - 1), ("api", API_QUERIES - 1)):
            with django_assert_num_queries(count):
                assert client.get(urls(run)[kind]).status_code == 200
