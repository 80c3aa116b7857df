"""Pages that say what they mean: the home page's two lists never show one run twice, search
results come grouped, the change badges differ by more than colour, the series table rounds,
and the note form asks for the note only."""

import re

import pytest
from django.db.models import Count
from django.urls import reverse
from django.utils.html import escape

from registry.models import BenchmarkRun, EvidenceLevel
from tests.site.test_reference_record_pages import REFERENCE_ID


@pytest.fixture(autouse=True)
def pages_rendered_each_time(settings):
    """The bundled data (tests/site/conftest.py's `bundled`) is loaded once for this module; each
    test changes what it needs inside its own transaction and reads pages rendered afresh."""
    settings.PAGE_CACHE_SECONDS = 0


def run_ids(html: str, section_id: str) -> list[str]:
    section = html.split(f'id="{section_id}"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'href="/runs/(\d+)/"', section)


@pytest.mark.django_db
class TestHomeLists:
    def test_recently_added_and_recently_verified_never_share_a_run(self, client, bundled):
        run = BenchmarkRun.objects.order_by("-published_at", "-id").first()
        BenchmarkRun.objects.filter(pk=run.pk).update(evidence_level=EvidenceLevel.REPRODUCED)
        html = client.get(reverse("registry:home")).content.decode()
        added, verified = run_ids(html, "recent-h"), run_ids(html, "verified-h")
        assert str(run.pk) in verified and str(run.pk) not in added
        assert added and not set(added) & set(verified)


@pytest.mark.django_db
class TestSearchGroups:
    def test_runs_are_grouped_by_kernel_pass_and_metric_latency_first(self, client, bundled):
        html = client.get(reverse("registry:search"), {"q": "geglu"}).content.decode()
        groups = html.split('class="run-groups"', 1)[1].split("</table>", 1)[0]
        rows = re.findall(r"<td>(\w+)</td><td>([\w ]+)</td><td class=\"num\">(\d+)</td>", groups)
        assert (
            rows
            and sum(int(n) for _, _, n in rows)
            == BenchmarkRun.objects.filter(external_id__icontains="geglu").count()
        )
        metrics = [metric for _, metric, _ in rows]
        assert metrics.index("latency") < metrics.index("peak memory")


@pytest.mark.django_db
class TestWords:
    def test_the_series_table_rounds_its_figures(self, client, bundled):
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        html = client.get(run.get_absolute_url()).content.decode()
        table = html.split('class="series-table"', 1)[1].split("</table>", 1)[0]
        assert "144.21" in table and "144.2132" not in table

    def test_a_series_of_one_value_is_said_in_words_not_drawn_as_a_lone_dot(self, client, bundled):
        sizes = (
            BenchmarkRun.objects.values("comparison_key", "provider")
            .annotate(n=Count("id"))
            .order_by("n", "comparison_key", "provider")
        )
        lone, many = sizes.filter(n=1).first(), sizes.filter(n__gt=1).first()
        for series, drawn in ((lone, False), (many, True)):
            run = BenchmarkRun.objects.filter(
                comparison_key=series["comparison_key"], provider=series["provider"]
            )
            html = client.get(run.first().get_absolute_url()).content.decode()
            section = html.split('id="series"', 1)[1].split("</section>", 1)[0]
            assert ("<svg" in section) is drawn, series
            if not drawn:  # the sentence above the table says it instead
                assert "the only value" in section or "1 value published" in section

    def test_the_run_page_states_its_workload_under_its_heading(self, client, bundled):
        run = BenchmarkRun.objects.select_related("workload").get(external_id=REFERENCE_ID)
        html = client.get(run.get_absolute_url()).content.decode()
        top = html.split("</h1>", 1)[1].split('class="evidence"', 1)[0]
        assert f"Workload: {escape(run.workload.summary)}" in top and 'href="#workload"' in top

    def test_the_note_form_asks_for_the_note_only(self, client, bundled, contributor):
        client.force_login(contributor)
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        url = reverse("attestations:attestation-create", args=[run.pk])
        note = client.get(url, {"kind": "note"}).content.decode()
        full = client.get(url).content.decode()
        assert "<h1>Add a note</h1>" in note and 'name="median"' not in note and 'name="text"' in note
        assert 'name="median"' in full
        response = client.post(url + "?kind=note", {"kind": "note", "text": "Ran it; the same."})
        assert response.status_code == 302
        assert run.attestations.get().text == "Ran it; the same."


@pytest.mark.django_db
class TestApiToken:
    def test_a_first_token_does_not_speak_of_an_old_one(self, client, contributor):
        client.force_login(contributor)
        url = reverse("attestations:api-token-regenerate")
        first = client.post(url, follow=True).content.decode()
        assert "Your API token was created" in first and "old one" not in first
        second = client.post(url, follow=True).content.decode()
        assert "the old one no longer works" in second
        assert second.count('<p class="banner">') == 1


@pytest.mark.parametrize(
    ("ours", "theirs", "differs"),
    [
        ("CPU", "cpu", False),
        ("NVIDIA H200", "NVIDIA  H200", False),
        ("2.11.0", "not recorded", False),
        ("2.11.0", "2.13.0", True),
    ],
)
def test_an_environment_value_differs_only_when_it_names_another_thing(ours, theirs, differs):
    from attestations.templatetags.reproduce_tags import differs_from

    assert differs_from(ours, theirs) is differs
