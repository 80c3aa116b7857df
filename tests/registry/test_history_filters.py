"""The API lists filter current, superseded and withdrawn runs, and runs by upstream pull request."""

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.sources.liger.services import liger_history_import
from tests.sources.liger.test_history_import import _folder

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(tmp_path):
    """Versions 1, 10, 13, 14: 24 values replaced (#406), 30 keys dropped (#589)."""
    liger_history_import(path=_folder(tmp_path))


def count(client, **params) -> int:
    response = client.get(reverse("run-list"), params)
    assert response.status_code == 200, response.content
    return response.json()["count"]


class TestListFilters:
    def test_superseded_true_and_false_split_the_runs(self, client, history):
        assert (
            count(client, superseded="true")
            == 24
            == BenchmarkRun.objects.filter(superseded_by__isnull=False).count()
        )
        assert count(client, superseded="false") == BenchmarkRun.objects.count() - 24

    def test_withdrawn_true_and_false_split_the_runs(self, client, history):
        assert count(client, withdrawn="true") == 30
        assert count(client, withdrawn="false") == BenchmarkRun.objects.count() - 30

    def test_current_is_neither_superseded_nor_withdrawn(self, client, history):
        assert count(client, current="true") == BenchmarkRun.objects.current().count() == 806
        assert count(client, current="false") == 24 + 30
        assert count(client, current="true", superseded="true") == 0

    def test_filters_combine_with_the_others(self, client, history):
        assert count(client, superseded="true", kernel="fused_linear_cross_entropy") == 24
        assert count(client, superseded="true", kernel="geglu") == 0

    def test_runs_by_the_pull_request_that_published_them(self, client, history):
        assert count(client, pull_request=406, superseded="false", kernel="fused_linear_cross_entropy") == 24
        assert (
            count(client, pull_request=196)
            == BenchmarkRun.objects.filter(origin__pull_request=196).count()
            > 0
        )

    @pytest.mark.parametrize("params", [{"superseded": "maybe"}, {"current": "2"}, {"pull_request": "x"}])
    def test_a_bad_value_is_a_400_naming_the_parameter(self, client, history, params):
        response = client.get(reverse("run-list"), params)
        assert response.status_code == 400
        assert next(iter(params)) in response.content.decode()
