"""The benchmark's synthetic registry is what the importer would produce from the same rows."""

import pytest
from django.db import transaction

from bench import generate
from registry.models import BenchmarkRun, Environment, Implementation, Workload
from registry.sources.liger.services import liger_import

FIELDS = (
    "external_id",
    "digest",
    "comparison_key",
    "upstream_key",
    "rank",
    "group_size",
    "median",
    "p20",
    "p80",
    "source_metrics",
    "labels",
    "manifest",
    "superseded_by__external_id",
    "withdrawn",
    "implementation__digest",
    "workload__digest",
    "protocol__digest",
    "environment__digest",
    "kernel__slug",
    "gpu_product",
    "provider",
    "x_name",
    "x_value",
)
ROWS = generate.CHUNK + 500  # more than one chunk, every Liger version, more than one GPU


def _snapshot() -> dict:
    return {row["external_id"]: row for row in BenchmarkRun.objects.values(*FIELDS)}


def _rolled_back(build) -> dict:
    """Build a registry, read it, and leave the database as it was."""
    with transaction.atomic():
        build()
        snapshot = _snapshot()
        transaction.set_rollback(True)
    return snapshot


@pytest.mark.django_db
class TestSyntheticRegistryMatchesTheImporter:
    def test_fast_path_writes_the_rows_the_importer_writes(self, tmp_path):
        fast = _rolled_back(lambda: generate.registry_grow(ROWS, workers=1, log=lambda _: None))
        path = generate.write_csv(tmp_path / "synthetic.csv", ROWS)
        imported = _rolled_back(lambda: liger_import(path=path))

        assert len(fast) == ROWS
        assert fast.keys() == imported.keys()
        assert [fast[key] for key in sorted(fast)] == [imported[key] for key in sorted(imported)]

    def test_later_versions_supersede_earlier_ones_and_only_current_runs_are_ranked(self):
        generate.registry_grow(ROWS, workers=1, log=lambda _: None)

        superseded = BenchmarkRun.objects.filter(superseded_by__isnull=False)
        assert superseded.count() > 0
        assert not superseded.filter(rank__isnull=False).exists()
        assert not BenchmarkRun.objects.current().filter(rank__isnull=True).exists()
        assert set(BenchmarkRun.objects.values_list("labels__liger_version", flat=True)) == set(
            generate.VERSIONS
        )

    def test_rows_spread_over_kernels_gpus_and_workloads(self):
        generate.registry_grow(ROWS, workers=1, log=lambda _: None)

        assert BenchmarkRun.objects.values("kernel").distinct().count() >= 30
        assert Environment.objects.count() >= 2
        assert Workload.objects.count() > BenchmarkRun.objects.values("kernel").distinct().count()
        assert Implementation.objects.filter(revision="0.6.0").exists()
