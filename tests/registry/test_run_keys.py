"""A run carries copies of its specs' GPU product, provider and swept parameter, on which the
kernel page sorts and groups: every way runs are written fills them, equal to the specs'."""

import importlib

import pytest
from django.apps import apps

from registry.models import BenchmarkRun
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_export, controlled_runs_load
from registry.services.run_keys import RUN_KEY_SOURCES, run_keys_fill
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db
MIGRATION = importlib.import_module("registry.migrations.0005_kernel_page_sort")


def _differing(runs) -> list[tuple]:
    """(run, column) for each copy that is not its spec's value."""
    related = runs.select_related(*{spec for spec, _ in RUN_KEY_SOURCES.values()})
    return [
        (run.pk, column)
        for run in related
        for column, (spec, name) in RUN_KEY_SOURCES.items()
        if getattr(run, column) != getattr(getattr(run, spec), name)
    ]


@pytest.fixture
def imported(tmp_path):
    liger_import(path=write_csv(tmp_path / "geglu.csv", bundled_rows()))
    return BenchmarkRun.objects.all()


class TestEveryWriterFillsTheCopies:
    def test_an_import_writes_its_runs_copies(self, imported):
        assert imported.count() > 0
        assert not imported.filter(gpu_product="").exists()
        assert not imported.filter(provider="").exists()
        assert _differing(imported) == []

    def test_a_later_import_fills_its_own_runs(self, imported, tmp_path):
        liger_import(path=write_csv(tmp_path / "swiglu.csv", bundled_rows(kernel="swiglu")))

        later = BenchmarkRun.objects.filter(kernel__slug="swiglu")
        assert later.count() > 0
        assert _differing(BenchmarkRun.objects.all()) == []

    def test_loaded_controlled_runs_have_them_and_exports_leave_them_out(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        loaded = BenchmarkRun.objects.filter(source__slug="kernelindex-controlled")
        assert loaded.count() > 0
        assert _differing(loaded) == []
        exported = controlled_runs_export(runs=loaded)
        assert not set(RUN_KEY_SOURCES) & set(exported["runs"][0]["run"])


class TestFilling:
    def test_the_fill_touches_only_the_runs_it_is_given(self, imported):
        imported.update(gpu_product="", provider="", x_name="", x_value=None)
        first = imported.order_by("pk").first()

        assert run_keys_fill(runs=BenchmarkRun.objects.filter(pk=first.pk)) == 1

        assert _differing(BenchmarkRun.objects.filter(pk=first.pk)) == []
        assert BenchmarkRun.objects.filter(gpu_product="").count() == imported.count() - 1

    def test_the_migration_fills_runs_written_before_it(self, imported):
        imported.update(gpu_product="", provider="", x_name="", x_value=None)

        MIGRATION.run_keys_fill(apps, None)

        assert _differing(BenchmarkRun.objects.all()) == []
