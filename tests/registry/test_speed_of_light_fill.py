"""Which runs `load_bundled_data` gives their speed of light again: the runs of a GPU model that
gained a measured ceiling, runs without a verdict and runs whose verdict came from other formulas
or datasheet figures. On a second load of unchanged data, none: no verdict is computed again."""

import functools
import json
import shutil
from collections import Counter
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import speed_of_light
from registry.models import BenchmarkRun
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR
from registry.reruns.management.commands import load_bundled_data
from registry.reruns.services.measured_ceilings import BUNDLED_CEILINGS_DIR, measured_ceilings_load
from registry.sources.liger.services import liger_import
from registry.speed_of_light import speed_of_light_fill, speed_of_light_stale, verdict_basis
from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db
A100, H200 = "nvidia-a100-sxm4-80gb", "nvidia-h200"
H200_GEGLU = BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz"
A100_CEILING = {
    "format": "kernelindex-ceilings/v1",
    "gpu": A100,
    "gpu_name": "NVIDIA A100-SXM4-80GB",
    "measured_at": "2026-12-01T00:00:00+00:00",
    "memory_bandwidth": {"median": 1800.0, "ci95": [1790.0, 1810.0]},
    "bf16_dense": {"median": 280.0, "ci95": [279.0, 281.0]},
}


def load() -> str:
    out = StringIO()
    call_command("load_bundled_data", stdout=out)
    return out.getvalue()


def small_bundle_patch(patch: pytest.MonkeyPatch, folder) -> None:
    """The command over a slice of what ships, so that a load takes a second: the A100 GeGLU rows
    of the Liger data and the H200 GeGLU controlled runs (and the shipped ceilings)."""
    csv = write_csv(folder / "geglu.csv", bundled_rows("geglu"))
    patch.setattr(
        load_bundled_data,
        "bundled_load_all",
        lambda progress: {"liger-kernel": liger_import(path=csv, progress=progress)},
    )
    patch.setattr(load_bundled_data, "BUNDLED_CONTROLLED_DIR", H200_GEGLU)


@pytest.fixture
def small_bundle(tmp_path, monkeypatch):
    small_bundle_patch(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def loaded_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """The small bundle loaded once for this module, committed, and removed after it: each test
    starts from the state a first load leaves (its own writes are rolled back), as it did when
    each loaded it again inside its transaction (the module's tests took 5 loads, not one)."""
    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as patch:
        small_bundle_patch(patch, tmp_path_factory.mktemp("small-bundle"))
        load()
    yield
    with django_db_blocker.unblock():
        call_command("flush", "--noinput", verbosity=0)


@pytest.fixture
def loaded(loaded_once, small_bundle):
    assert set(BenchmarkRun.objects.values_list("environment__slug", flat=True)) == {A100, H200}


@pytest.fixture
def computed():
    """The GPU model of every verdict computed while the test runs, one entry per verdict."""
    gpus = []
    compute = speed_of_light.verdict

    def counted(**arguments):
        gpus.append(arguments["gpu_slug"])
        return compute(**arguments)

    with mock.patch.object(speed_of_light, "verdict", counted):
        yield gpus


def sol_updates(queries) -> int:
    """Runs written by `_sol_write` (an executemany is logged once, as "<n> times: <sql>")."""
    written = 0
    for query in queries:
        times, _, sql = query["sql"].partition(" times: ")
        if sql.startswith('UPDATE "registry_benchmarkrun" SET "speed_of_light"'):
            written += int(times)
    return written


def verdicts(runs) -> dict:
    return dict(runs.values_list("pk", "speed_of_light"))


class TestASecondLoadOfUnchangedData:
    def test_computes_and_writes_no_runs_speed_of_light(self, loaded, computed):
        with CaptureQueriesContext(connection) as queries:
            output = load()

        assert computed == []
        assert sol_updates(queries) == 0
        assert "speed-of-light: 0 runs' speed of light updated" in output

    # Everything that ships, loaded twice: tests/sources/test_everything_that_ships.py.


class TestALoadThatAddsAMeasuredCeiling:
    @pytest.fixture
    def a100_ceiling_shipped(self, tmp_path, monkeypatch):
        """The shipped ceilings with one more file: a measurement of the A100 80GB."""
        shutil.copytree(BUNDLED_CEILINGS_DIR, tmp_path / "ceilings")
        (tmp_path / "ceilings" / f"{A100}.json").write_text(json.dumps(A100_CEILING))
        loader = functools.partial(measured_ceilings_load, path=tmp_path / "ceilings")
        monkeypatch.setattr(load_bundled_data, "measured_ceilings_load", loader)

    def test_computes_exactly_that_gpu_models_runs_again(self, loaded, a100_ceiling_shipped, computed):
        a100_runs = BenchmarkRun.objects.filter(environment__slug=A100)
        others = verdicts(BenchmarkRun.objects.exclude(environment__slug=A100))

        output = load()

        assert Counter(computed) == {A100: a100_runs.count()}
        assert "ceilings: 1 new measured ceilings" in output
        assert verdicts(BenchmarkRun.objects.exclude(environment__slug=A100)) == others
        latency = a100_runs.filter(metric="latency").exclude(sol_percent=None)
        assert latency.count() > 10
        assert not latency.filter(sol_percent_measured=None).exists()

    def test_writes_only_the_runs_whose_figures_changed(self, loaded, a100_ceiling_shipped):
        with CaptureQueriesContext(connection) as queries:
            load()

        measured = BenchmarkRun.objects.filter(environment__slug=A100).exclude(sol_percent_measured=None)
        assert sol_updates(queries) == measured.count() > 10


class TestStaleVerdicts:
    def test_a_run_without_a_verdict_or_with_one_from_other_formulas_is_filled(self, loaded, computed):
        never, older = BenchmarkRun.objects.filter(metric="latency").exclude(sol_percent=None)[:2]
        expected = {run.pk: run.speed_of_light for run in (never, older)}
        assert {sol["basis"] for sol in expected.values()} == {verdict_basis()}
        BenchmarkRun.objects.filter(pk=never.pk).update(speed_of_light={}, sol_percent=None)
        BenchmarkRun.objects.filter(pk=older.pk).update(
            speed_of_light={**older.speed_of_light, "basis": "formulas-of-an-older-deploy"}
        )

        output = load()

        assert len(computed) == 2
        assert "speed-of-light: 2 runs' speed of light updated" in output
        assert verdicts(BenchmarkRun.objects.filter(pk__in=expected)) == expected
        never.refresh_from_db()
        assert never.sol_percent is not None


class TestTheFillsQueries:
    def fill_queries(self, stale: int, runs) -> int:
        runs.filter(pk__in=list(runs.values_list("pk", flat=True)[:stale])).update(speed_of_light={})
        with CaptureQueriesContext(connection) as queries:
            assert speed_of_light_fill(runs=speed_of_light_stale()) == stale
        return len(queries)

    def test_do_not_grow_with_the_number_of_stale_runs(self, loaded):
        runs = BenchmarkRun.objects.all()
        assert runs.count() > 40
        assert self.fill_queries(1, runs) == self.fill_queries(40, runs)
