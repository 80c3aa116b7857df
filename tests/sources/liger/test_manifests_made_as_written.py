"""A first import makes each new run's manifest and digest as it writes the run's row (so that the
work runs while PostgreSQL takes the rows before it), and holds off Python's cyclic garbage
collector while it runs: neither changes what is written, and the collector is left as it was."""

import gc
from pathlib import Path

import pytest

from registry.models import BenchmarkRun
from registry.services import ImportRejected
from registry.sources.liger import importer as liger
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import
from tests.registry.csvdata import bundled_rows, write_csv


class TestManifestsMadeLater:
    def test_a_manifest_made_after_the_parse_is_the_one_the_parse_makes(self):
        data = BUNDLED_LIGER_CSV.read_bytes()
        at_once = liger.parse_file(data)
        later = liger.parse_file(data, manifests=False)
        assert all("digest" not in row.run for row in later)

        for row in later:
            row.manifest_make()

        assert [(row.run, row.manifest_json) for row in later] == [
            (row.run, row.manifest_json) for row in at_once
        ]

    def test_making_a_manifest_twice_changes_nothing(self):
        row = liger.parse_file(BUNDLED_LIGER_CSV.read_bytes(), manifests=False)[0]
        row.manifest_make()
        made = (dict(row.run), row.manifest_json)

        row.manifest_make()

        assert (row.run, row.manifest_json) == made

    @pytest.mark.django_db
    def test_each_imported_run_holds_its_rows_manifest_and_digest(self, tmp_path):
        path = write_csv(tmp_path / "geglu.csv", bundled_rows("geglu"))
        parsed = {row.run["external_id"]: row.run for row in liger.parse_file(Path(path).read_bytes())}

        liger_import(path=path)

        stored = BenchmarkRun.objects.values_list("external_id", "digest", "manifest")
        assert {e: (d, m) for e, d, m in stored} == {
            e: (run["digest"], run["manifest"]) for e, run in parsed.items()
        }


@pytest.mark.django_db
class TestTheCollectorIsLeftAsItWas:
    def test_collection_runs_again_after_an_import(self, tmp_path):
        assert gc.isenabled()

        liger_import(path=write_csv(tmp_path / "geglu.csv", bundled_rows("geglu")))

        assert gc.isenabled()

    def test_collection_runs_again_after_a_refused_import(self, tmp_path):
        rows = bundled_rows("geglu")
        rows[1] = dict(rows[1], y_value_50="fast")

        with pytest.raises(ImportRejected):
            liger_import(path=write_csv(tmp_path / "bad.csv", rows))

        assert gc.isenabled()
        assert not BenchmarkRun.objects.exists()

    def test_a_collector_switched_off_before_stays_off(self, tmp_path):
        gc.disable()
        try:
            liger_import(path=write_csv(tmp_path / "geglu.csv", bundled_rows("geglu")))
            assert not gc.isenabled()
        finally:
            gc.enable()
