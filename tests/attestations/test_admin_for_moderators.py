"""An admin that leads a moderator to the work (issue 37, the admin): a home with the queues and
their counts, stale and unserved jobs and a link to operations; readable changelists; search by run
id; a warning before queueing work no worker serves; an audit log filtered by the types it holds."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from attestations import services
from attestations.models import AuditEntry
from registry.reruns.models import RerunJob
from registry.reruns.services import rerun_request
from tests.attestations.conftest import submit_reproduction

pytestmark = pytest.mark.django_db

A100_QUEUE = "gpu.nvidia-a100-sxm4-80gb"


def cell(html: str, name: str) -> str:
    found = re.search(rf'id="queue-{name}"[^>]*>\s*(\d+)', html)
    assert found, f"no count for {name}"
    return found[1]


class TestTheHomeShowsTheWork:
    @pytest.fixture
    def work(self, run, contributor, other_contributor, moderator):
        submit_reproduction(run, contributor)
        submit_reproduction(run, other_contributor)
        services.issue_report_create(run=run, reporter=contributor, category="wrong_value", description="2x")
        job = rerun_request(run=run, requested_by=moderator, reason="check")
        RerunJob.objects.filter(pk=job.pk).update(created_at=job.created_at - timedelta(days=2))
        return job

    def test_queues_with_their_counts_and_a_link_to_operations(self, moderator_client, work):
        html = moderator_client.get(reverse("admin:index")).content.decode()

        assert (cell(html, "attestations"), cell(html, "reports"), cell(html, "queued")) == ("2", "1", "1")
        assert reverse("admin-operations") in html
        assert reverse("admin:attestations_attestation_changelist") in html

    def test_stale_and_unserved_jobs_are_named(self, moderator_client, work):
        html = moderator_client.get(reverse("admin:index")).content.decode()

        assert cell(html, "stale") == "1"
        assert f"#{work.pk}" in html
        assert A100_QUEUE in html and "no live worker" in html


class TestChangelistsAreReadable:
    def test_runs_show_short_ids_and_rounded_figures(self, moderator_client, run):
        html = moderator_client.get(reverse("admin:registry_benchmarkrun_changelist")).content.decode()

        assert str(run.median) not in html  # 144.2132110595703
        assert "144.2" in html
        assert f">{run.external_id}<" not in html  # shown as #id; the full id is the row's label

    def test_links_are_links_not_json(self, moderator_client, run, contributor):
        attestation = submit_reproduction(run, contributor, links=["https://example.org/log.txt"])

        html = moderator_client.get(
            reverse("admin:attestations_attestation_change", args=[attestation.pk])
        ).content.decode()

        assert '["https://example.org/log.txt"]' not in html
        assert '<a href="https://example.org/log.txt" rel="nofollow noopener">' in html


class TestSearchByRunId:
    def test_a_run_is_found_by_its_id(self, moderator_client, runs):
        run, memory = runs["reference"], runs["memory"]

        html = moderator_client.get(
            reverse("admin:registry_benchmarkrun_changelist"), {"q": f"#{memory.pk}"}
        ).content.decode()

        assert f">#{memory.pk}<" in html and f">#{run.pk}<" not in html

    def test_a_bare_number_finds_the_run_of_that_id_too(self, moderator_client, runs):
        memory = runs["memory"]
        html = moderator_client.get(
            reverse("admin:registry_benchmarkrun_changelist"), {"q": str(memory.pk)}
        ).content.decode()
        assert f">#{memory.pk}<" in html

    def test_the_search_box_says_what_it_finds_in_text_not_in_aria_describedby(self, moderator_client, runs):
        html = moderator_client.get(reverse("admin:registry_benchmarkrun_changelist")).content.decode()
        assert '<p class="help search-hint">A run&#x27;s id (1234 or #1234)' in html
        assert 'aria-describedby="searchbar_helptext"' not in html

    def test_attestations_of_a_run_in_any_state(self, moderator_client, run, contributor, superuser):
        decided = submit_reproduction(run, contributor)
        services.attestation_approve(attestation=decided, moderator=superuser)

        html = moderator_client.get(
            reverse("admin:attestations_attestation_changelist"), {"q": str(run.pk)}
        ).content.decode()

        assert f"/admin/attestations/attestation/{decided.pk}/change/" in html


class TestAWarningBeforeQueueingWorkNoWorkerServes:
    def test_the_rerun_page_names_the_queue_without_a_worker(self, moderator_client, run):
        html = moderator_client.post(
            reverse("admin:registry_benchmarkrun_changelist"),
            {"action": "request_rerun", "_selected_action": [run.pk]},
        ).content.decode()

        assert A100_QUEUE in html and "no live worker" in html
        assert not RerunJob.objects.exists()  # nothing queued yet: the page asks first


class TestTheAuditLogFiltersByTheTypesItHolds:
    def test_only_types_with_entries_are_offered(self, moderator_client, run, contributor):
        submit_reproduction(run, contributor)
        assert AuditEntry.objects.exists()

        html = moderator_client.get(reverse("admin:attestations_auditentry_changelist")).content.decode()

        filter_links = re.findall(r'href="\?type=\d+"[^>]*>([^<]+)<', html)
        assert sorted(filter_links) == ["Attestation", "User"]  # the submission, the moderator made
