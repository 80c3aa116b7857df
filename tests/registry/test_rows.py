"""registry/rows.py: changed rows written back by one UPDATE per row, as `save()` would write
the same fields: JSON, numbers, text and a foreign key, each row its own values; the other
fields and the rows not given are left as they are."""

import pytest

from registry.models import BenchmarkRun
from registry.rows import rows_update
from tests.reruns.conftest import SMALL_ROWS, csv_import

pytestmark = pytest.mark.django_db


def test_each_row_gets_its_own_fields_and_nothing_else_changes(tmp_path):
    csv_import(tmp_path / "small.csv", SMALL_ROWS)
    first, second, untouched = BenchmarkRun.objects.order_by("pk")[:3]
    before = {run.pk: (run.median, run.digest, run.labels) for run in (first, second, untouched)}
    first.labels, first.sol_percent = {"note": 'it\'s "quoted"', "n": [1, 2.5]}, 41.5
    second.labels, second.sol_percent, second.first_import = {"x": None}, None, None

    assert rows_update([first, second], ["labels", "sol_percent", "first_import"]) == 2

    found = BenchmarkRun.objects.in_bulk([first.pk, second.pk, untouched.pk])
    assert (found[first.pk].labels, found[first.pk].sol_percent) == (
        {"note": 'it\'s "quoted"', "n": [1, 2.5]},
        41.5,
    )
    assert (found[second.pk].labels, found[second.pk].sol_percent) == ({"x": None}, None)
    assert found[second.pk].first_import_id is None and found[first.pk].first_import_id is not None
    for pk, (median, digest, _) in before.items():  # fields not named stay as they were
        assert (found[pk].median, found[pk].digest) == (median, digest)
    assert found[untouched.pk].labels == before[untouched.pk][2]  # and rows not given


def test_nothing_to_write_sends_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert rows_update([], ["labels"]) == 0
