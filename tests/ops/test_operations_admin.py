"""/admin/operations/: what moderators and operators look at first."""

import pytest
from django.urls import reverse

from registry.sources.liger.sync import liger_sync


@pytest.mark.django_db
class TestOperationsPageAccess:
    def test_a_stranger_is_sent_to_log_in(self, client):
        response = client.get(reverse("admin-operations"))

        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))

    def test_a_contributor_is_sent_to_log_in(self, client, contributor):
        client.force_login(contributor)

        response = client.get(reverse("admin-operations"))

        assert response.status_code == 302


@pytest.mark.django_db
class TestOperationsPageContent:
    def test_it_shows_the_last_syncs_failure(self, client, moderator, pypi):
        pypi.add("0.8.5")
        liger_sync()
        pypi.add("0.8.6", sha256="0" * 64)
        liger_sync()
        client.force_login(moderator)

        response = client.get(reverse("admin-operations"))

        assert response.status_code == 200
        assert response.context["last_sync"].release == "0.8.6"
        assert response.context["last_sync"].status == "failed"
        assert "does not match PyPI&#x27;s" in response.content.decode()
        assert [i.filename for i in response.context["last_imports"]][:3] == [
            "all_benchmark_data_cutile.csv",
            "all_benchmark_data_cutedsl.csv",
            "all_benchmark_data.csv",
        ]

    def test_it_shows_the_last_successful_sync_per_file(self, client, moderator, pypi):
        pypi.add("0.8.5")
        liger_sync()
        client.force_login(moderator)

        response = client.get(reverse("admin-operations"))

        assert response.status_code == 200
        assert response.context["last_sync"].status == "imported"
        body = response.content.decode()
        assert "all_benchmark_data_cutedsl.csv" in body and "Imported" in body

    def test_it_lists_stuck_and_failed_jobs_and_queues_without_a_worker(
        self, client, moderator, jobs, django_assert_max_num_queries
    ):
        client.force_login(moderator)

        with django_assert_max_num_queries(12):
            response = client.get(reverse("admin-operations"))

        assert response.status_code == 200
        assert [j.pk for j in response.context["stuck_jobs"]] == [jobs["stuck"].pk]
        assert [j.pk for j in response.context["failed_jobs"]] == [jobs["failed"].pk]
        # No worker runs in the test: the A100 queue has work (queued and running) and nobody on it.
        assert response.context["queues_without_worker"] == ["gpu.nvidia-a100-sxm4-80gb"]
        assert "CUDA out of memory" in response.content.decode()

    def test_a_job_whose_result_was_sent_recently_is_not_shown_as_stuck(self, client, moderator, jobs):
        # Its heartbeat stopped when the result was handed on; the reconciler leaves it alone
        # until JOB_RESULT_DEADLINE, and so does the page.
        from django.utils import timezone

        from registry.reruns.models import RerunJob

        RerunJob.objects.filter(pk=jobs["stuck"].pk).update(result_sent_at=timezone.now())
        client.force_login(moderator)

        response = client.get(reverse("admin-operations"))

        assert response.status_code == 200
        assert jobs["stuck"].pk not in [j.pk for j in response.context["stuck_jobs"]]
