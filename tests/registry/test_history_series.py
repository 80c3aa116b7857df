"""The run page's series: every published value of one measurement, each point linking to its
run and to the upstream commit, and whether this value is current."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry.models import BenchmarkRun
from registry.series import series_of
from registry.sources.liger.services import liger_history_import
from tests.sources.liger.test_history_import import _folder

pytestmark = pytest.mark.django_db

REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)
PR_406 = "https://github.com/linkedin/Liger-Kernel/pull/406"


@pytest.fixture
def history(tmp_path):
    liger_history_import(path=_folder(tmp_path, picked=("1", "10")))


@pytest.fixture
def replaced(history):
    return BenchmarkRun.objects.filter(superseded_by__isnull=False).select_related("superseded_by").first()


def page(client, run):
    response = client.get(run.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


class TestSeriesOnTheRunPage:
    def test_the_reference_record_has_one_value_still_current(self, client, history):
        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        series = series_of(run)
        assert [p.run.pk for p in series.points] == [run.pk]
        html = page(client, run)
        assert 'id="series"' in html
        assert "This value is current</strong>: the only value the source has published" in html
        assert (
            "https://github.com/linkedin/Liger-Kernel/commit/b5672a153b7b314a367996fc6cd60a57aeda4ccc" in html
        )
        assert "https://github.com/linkedin/Liger-Kernel/pull/196" in html

    def test_a_replaced_run_shows_both_values_and_which_is_current(self, client, replaced):
        series = series_of(replaced)
        assert [p.status for p in series.points] == ["superseded", "current"]
        assert series.current == replaced.superseded_by
        html = page(client, replaced)
        assert "This value is not current:</strong> the source replaced it" in html
        assert replaced.superseded_by.get_absolute_url() in html
        assert PR_406 in html
        assert html.count('<g class="point">') == 2

    def test_the_newer_value_says_it_is_current_among_two(self, client, replaced):
        html = page(client, replaced.superseded_by)
        assert "the latest of 2 values the source has published" in html
        table = html.split('class="series-table"', 1)[1].split("</table>", 1)[0]
        assert f'<a href="{replaced.get_absolute_url()}"' in table

    def test_each_band_spans_p20_to_p80(self, replaced):
        for point in series_of(replaced).points:
            assert point.y_low <= point.y <= point.y_high

    def test_the_page_costs_the_same_queries_for_one_value_or_two(self, client, replaced):
        single = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        counts = []
        for run in (single, replaced, replaced.superseded_by):
            with CaptureQueriesContext(connection) as queries:
                client.get(run.get_absolute_url())
            counts.append(len(queries))
        assert counts[0] == counts[1] == counts[2]

    def test_the_series_section_costs_one_query(self, replaced, django_assert_num_queries):
        with django_assert_num_queries(1):
            series = series_of(replaced)
            assert [p.run.origin.pull_request for p in series.points] == [196, 406]
            str(series.svg)
