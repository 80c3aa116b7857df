"""A measure job's new run is a new value of its series: the recorder judges the step from the
previous value, with both measure jobs' samples (Mann-Whitney plus the practical threshold)."""

import pytest

from registry.models import Change, ChangeKind
from tests.reruns.conftest import h200_measured, harness_result

pytestmark = pytest.mark.django_db


def measured(h200_run, median: float, *, transformers: str = "4.57.1"):
    """A measure job of the H200 run's target; `transformers` is the huggingface provider's
    version, so a new one is a new version of the software measured."""
    return h200_measured(h200_run, harness_result(median, environment=environment(transformers))).result_run


def environment(transformers: str) -> dict:
    return {**harness_result(1.0)["environment"], "transformers": transformers}


def test_a_slower_second_measurement_of_a_new_version_is_a_regression_of_its_series(h200_run):
    first = measured(h200_run, 1.0)
    assert not Change.objects.exists()

    second = measured(h200_run, 1.5, transformers="4.58.0")

    change = Change.objects.get()
    assert (change.before_id, change.after_id) == (first.pk, second.pk)
    assert change.kind == ChangeKind.REGRESSION
    assert change.ratio == pytest.approx(1.5, rel=0.01)


def test_an_equal_second_measurement_is_no_change(h200_run):
    measured(h200_run, 1.0)
    measured(h200_run, 1.0)

    assert not Change.objects.exists()
