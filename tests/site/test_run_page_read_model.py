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


class TestStoredIntervals:
    def test_every_loaded_measurement_stores_the_interval_its_samples_give(self, controlled_run):
        from registry.reruns.judged import judged_interval
        from registry.reruns.models import RerunJob

        jobs = RerunJob.objects.filter(kind="measure", result_run__isnull=False).exclude(samples=[])
        assert jobs.exists()
        for job in jobs:
            assert (job.judged_ci_low, job.judged_ci_high) == judged_interval(
                job.metric, job.samples, job.upstream
            )
            assert job.judged_ci_low <= job.judged_ci_high

    def test_rank_intervals_read_the_stored_interval_not_the_samples(self, client, controlled_run):
        from registry.reruns.models import RerunJob

        member = (
            BenchmarkRun.objects.current()
            .filter(comparison_key=controlled_run.comparison_key, source__slug="kernelindex-controlled")
            .exclude(pk=controlled_run.pk)
            .first()
        )
        job = RerunJob.objects.get(kind="measure", result_run=member)
        # Samples changed behind the registry's back leave the stored interval, and the rank, alone;
        # the stored interval moved is what the page reads.
        RerunJob.objects.filter(pk=job.pk).update(samples=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        page = run_page.run_page_of(BenchmarkRun.objects.public().get(pk=controlled_run.pk))
        shown = next(m for m in page.members if m.pk == member.pk).standing
        RerunJob.objects.filter(pk=job.pk).update(judged_ci_low=job.judged_ci_low * 0.5)
        again = run_page.run_page_of(BenchmarkRun.objects.public().get(pk=controlled_run.pk))
        moved = next(m for m in again.members if m.pk == member.pk).standing
        assert shown.low != moved.low or shown.summary != moved.summary or shown.high != moved.high

    def test_verify_registry_reports_a_stored_interval_its_samples_do_not_give(self, controlled_run):
        from registry.reruns.models import RerunJob
        from tests.registry.test_run_integrity import verify

        assert verify()[0]
        job = RerunJob.objects.get(kind="measure", result_run=controlled_run)
        RerunJob.objects.filter(pk=job.pk).update(judged_ci_high=job.judged_ci_high * 1.5)
        ok, out = verify()
        assert not ok and controlled_run.external_id in out and "stored interval" in out
