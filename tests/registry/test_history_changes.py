"""Changes: steps between consecutive values of a series, judged with the data's uncertainty,
attributed to the upstream commit, listed on a page, in the API and in an Atom feed."""

import shutil
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry.models import Change, ChangeKind
from registry.services.changes import changes_detect, step_judge
from registry.sources.liger.services import BUNDLED_LIGER_HISTORY, liger_history_import, liger_import
from tests.sources.liger.test_history_import import _folder, registry_empty

# Versions 3 (#264, JSD added) and 4: #290 ("Add beta support for jsd") re-measured the 36 JSD rows.
PICKED = ("3", "4")


def value(median, p20=None, p80=None, metric="latency"):
    return SimpleNamespace(
        median=median, p20=median if p20 is None else p20, p80=median if p80 is None else p80, metric=metric
    )


class TestStepJudgement:
    def test_ranges_apart_and_over_the_threshold_is_a_regression(self):
        judgement = step_judge(value(10, 9.9, 10.1), value(11, 10.9, 11.1))
        assert judgement.kind == ChangeKind.REGRESSION and judgement.ratio == pytest.approx(1.1)
        assert "ranges do not overlap" in judgement.evidence

    def test_a_lower_value_is_an_improvement(self):
        assert step_judge(value(10, 9.9, 10.1), value(8, 7.9, 8.1)).kind == ChangeKind.IMPROVEMENT

    def test_overlapping_ranges_are_noise(self):
        assert step_judge(value(10, 9, 12), value(11, 10.5, 13)) is None

    def test_a_step_under_the_threshold_is_noise(self, settings):
        assert step_judge(value(10, 9.99, 10.01), value(10.3, 10.29, 10.31)) is None
        settings.CHANGE_THRESHOLD = 0.02
        assert step_judge(value(10, 9.99, 10.01), value(10.3, 10.29, 10.31)).kind == ChangeKind.REGRESSION

    def test_a_single_call_on_either_side_is_uncertain_never_a_regression(self):
        judgement = step_judge(value(10, 9.9, 10.1), value(20))
        assert judgement.kind == ChangeKind.UNCERTAIN
        assert "after value is a single call" in judgement.evidence

    def test_peak_memory_has_no_spread_and_is_called(self):
        assert (
            step_judge(value(100, metric="memory"), value(120, metric="memory")).kind == ChangeKind.REGRESSION
        )

    def test_controlled_samples_need_mann_whitney_as_well(self):
        before = [1.00 + i * 0.001 for i in range(30)]
        after = [1.10 + i * 0.001 for i in range(30)]
        clear = step_judge(value(1.015), value(1.115), samples_before=before, samples_after=after)
        assert clear.kind == ChangeKind.REGRESSION and clear.p_value <= 0.002
        few = step_judge(value(1.0), value(1.1), samples_before=[1.0, 1.2], samples_after=[1.1, 0.9])
        assert few.kind == ChangeKind.UNCERTAIN and few.p_value > 0.002


@pytest.fixture
def history(tmp_path, db):
    liger_history_import(path=_folder(tmp_path, picked=PICKED))


def steps() -> set:
    return set(
        Change.objects.values_list(
            "before__external_id", "after__external_id", "kind", "attributed_to__pull_request"
        )
    )


@pytest.mark.django_db
class TestChangesOfTheHistory:
    def test_every_step_of_the_replaced_values_is_judged_and_attributed(self, history):
        assert 0 < Change.objects.count() <= 36
        assert set(Change.objects.values_list("kernel__slug", flat=True)) == {"jsd"}
        assert set(Change.objects.values_list("attributed_to__pull_request", flat=True)) == {290}
        for change in Change.objects.select_related("before", "after"):
            assert change.before.observed_at < change.after.observed_at
            assert change.ratio == pytest.approx(change.after.median / change.before.median)

    def test_the_same_changes_whichever_comes_first(self, history, tmp_path):
        expected = steps()
        registry_empty()
        release = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "04-6817c2d3.csv", release)
        liger_import(path=release, release="0.3.0")
        liger_history_import(path=_folder(tmp_path / "again", picked=PICKED))
        assert steps() == expected

    def test_detecting_again_changes_nothing(self, history):
        before = steps()
        assert changes_detect() == {"created": 0, "removed": 0}
        assert steps() == before


@pytest.mark.django_db
class TestChangesPage:
    def test_lists_every_change_newest_first_with_its_pull_request(self, client, history):
        response = client.get(reverse("registry:change-list"))
        assert response.status_code == 200
        page = response.context["page"]
        assert page.paginator.count == Change.objects.count()
        dates = [c.observed_at for c in page]
        assert dates == sorted(dates, reverse=True)
        html = response.content.decode()
        assert "https://github.com/linkedin/Liger-Kernel/pull/290" in html
        assert "Kernels with new values in that commit" in html

    def test_filters_by_kind_kernel_and_date(self, client, history):
        for kind in ChangeKind.values:
            response = client.get(reverse("registry:change-list"), {"kind": kind})
            assert response.context["page"].paginator.count == Change.objects.filter(kind=kind).count()
        assert (
            client.get(reverse("registry:change-list"), {"kernel": "geglu"}).context["page"].paginator.count
            == 0
        )
        late = client.get(reverse("registry:change-list"), {"since": "2030-01-01"})
        assert late.context["page"].paginator.count == 0

    def test_the_filters_offer_what_has_changes_as_choices_not_free_text(self, client, history):
        html = client.get(reverse("registry:change-list")).content.decode()
        form = html.split('aria-label="Filter changes"', 1)[1].split("</form>", 1)[0]
        assert '<input name="kernel"' not in form and '<select name="kernel">' in form
        for change in Change.objects.select_related("kernel", "after__environment"):
            assert f'<option value="{change.kernel.slug}">{change.kernel.name}</option>' in form
            assert f'<option value="{change.after.environment.slug}">{change.gpu_product}</option>' in form
            assert f'<option value="{change.provider}">{change.provider}</option>' in form
        chosen = client.get(reverse("registry:change-list"), {"kernel": "jsd"}).content.decode()
        assert '<option value="jsd" selected>' in chosen

    def test_a_bad_filter_is_a_400(self, client, history):
        assert client.get(reverse("registry:change-list"), {"kind": "worse"}).status_code == 400

    def test_query_count_does_not_grow_with_the_changes(self, client, history):
        counts = []
        for params in ({"kernel": "nothing"}, {}):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(reverse("registry:change-list"), params).status_code == 200
            counts.append(len(queries))
        assert counts[0] + 1 >= counts[1]  # an empty page skips the page query
        with CaptureQueriesContext(connection) as queries:
            client.get(reverse("registry:change-list"), {"kind": "regression"})
        assert len(queries) == counts[1]


@pytest.mark.django_db
class TestChangesApiAndFeed:
    def test_the_api_lists_changes_with_their_attribution(
        self, client, history, django_assert_max_num_queries
    ):
        with django_assert_max_num_queries(2):
            response = client.get(reverse("change-list"))
        body = response.json()
        assert body["count"] == Change.objects.count()
        first = body["results"][0]
        assert first["attribution"]["pull_request"] == 290
        assert "jsd" in first["attribution"]["kernels_changed"]
        assert first["kind"] in ChangeKind.values and first["before"]["url"].startswith("/runs/")

    def test_the_api_filters_by_the_series_of_a_run(self, client, history):
        change = Change.objects.first()
        for run in (change.before_id, change.after_id):
            body = client.get(reverse("change-list"), {"series": run}).json()
            assert [c["id"] for c in body["results"]] == [change.pk]

    def test_the_feed_is_atom_and_holds_regressions_only(
        self, client, history, django_assert_max_num_queries
    ):
        with django_assert_max_num_queries(2):  # the feed's site (django.contrib.sites), then the changes
            response = client.get(reverse("registry:change-feed"))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("application/atom+xml")
        xml = response.content.decode()
        assert xml.count("<entry>") == Change.objects.filter(kind=ChangeKind.REGRESSION).count()
        assert "(#290)" in xml

    def test_the_feed_narrows_to_a_kernel(self, client, history):
        xml = client.get(reverse("registry:change-feed"), {"kernel": "geglu"}).content.decode()
        assert "<entry>" not in xml


@pytest.mark.django_db
class TestKernelAndComparePagesLinkToTheirChanges:
    def test_the_kernel_page_links_to_its_changes(self, client, history):
        html = client.get(reverse("registry:kernel-detail", args=["jsd"])).content.decode()
        assert reverse("registry:change-list") + "?kernel=jsd" in html

    def test_the_compare_page_links_to_the_changes_of_both_series(self, client, history):
        change = Change.objects.select_related("after").first()
        from registry.models import BenchmarkRun

        other = (
            BenchmarkRun.objects.current()
            .filter(comparison_key=change.after.comparison_key)
            .exclude(pk=change.after_id)
            .first()
        )
        html = client.get(reverse("registry:compare", args=[change.after_id, other.pk])).content.decode()
        assert f"{reverse('registry:change-list')}?series={change.after_id}" in html
        assert f"{reverse('registry:change-list')}?series={other.pk}" in html
