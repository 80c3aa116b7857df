"""Fixtures for the fault tests (helpers and constants are in tests/faults/support.py)."""

import pytest

from registry.models import BenchmarkRun
from tests.faults.support import SLOW_ROW
from tests.reruns.conftest import (  # noqa: F401 (fixtures)
    csv_import,
    h200_run,
    small_data,
    worker_key_registered,
)
from tests.reruns.worker import broker_clear, broker_is_redis


@pytest.fixture
def slow_cpu_run(tmp_path, db):
    csv_import(tmp_path / "slow.csv", [SLOW_ROW])
    return BenchmarkRun.objects.select_related("implementation", "environment", "workload").get(
        environment__slug="cpu", workload__parameters__T=256
    )


@pytest.fixture
def clean_broker():
    if broker_is_redis():
        broker_clear()
    yield
    if broker_is_redis():
        broker_clear()
