"""The importer with several data files of one release: all_benchmark_data.csv and its variants."""

import pytest

from registry.models import BenchmarkRun, SourceImport
from registry.sources.liger.services import liger_import
from tests.ops.conftest import fixture_bytes


def _write(tmp_path, name, data=None):
    path = tmp_path / name
    path.write_bytes(fixture_bytes(name) if data is None else data)
    return path


def _without_line(name: str, number: int) -> bytes:
    lines = fixture_bytes(name).splitlines(keepends=True)
    return b"".join(lines[:number] + lines[number + 1 :])


@pytest.mark.django_db
class TestVariantFilesDoNotWithdrawEachOther:
    def test_importing_the_cutile_file_supersedes_only_the_targets_both_files_measure(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data.csv"), release="0.8.5")

        summary = liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"), release="0.8.5")

        # jsd/torch/B200 appears in both files: one target (comparison key, implementation) has
        # one current run (one_current_run_per_target), so the cutile file's later measurements
        # (2026-06-16) supersede the main file's (2026-05-27); the main file's other runs stay.
        assert (summary.created, summary.withdrawn, summary.superseded) == (10, 0, 4)
        assert BenchmarkRun.objects.current().count() == 18
        jsd_torch = BenchmarkRun.objects.filter(kernel__slug="jsd", implementation__provider="torch")
        assert jsd_torch.count() == 8
        older = jsd_torch.filter(superseded_by__isnull=False)
        assert list(older.values_list("labels__variant", flat=True)) == [None] * 4
        assert {run.superseded_by.labels["variant"] for run in older} == {"cutile"}
        assert BenchmarkRun.objects.filter(labels__variant__isnull=True, superseded_by=None).count() == 8

    def test_importing_the_main_file_again_leaves_the_variant_runs_current(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data.csv"))
        liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"))

        summary = liger_import(path=_write(tmp_path, "all_benchmark_data.csv"))

        assert (summary.unchanged, summary.withdrawn) == (12, 0)
        assert BenchmarkRun.objects.filter(labels__variant="cutile", withdrawn=False).count() == 10

    def test_a_row_dropped_from_a_variant_file_is_withdrawn_alone(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data.csv"))
        liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"))
        later = tmp_path / "later"
        later.mkdir()

        summary = liger_import(
            path=_write(
                later, "all_benchmark_data_cutile.csv", _without_line("all_benchmark_data_cutile.csv", 1)
            )
        )

        assert (summary.unchanged, summary.withdrawn) == (9, 1)
        gone = BenchmarkRun.objects.get(withdrawn=True)
        assert gone.labels["variant"] == "cutile"
        assert gone.implementation.provider == "torch" and gone.rank is None

    def test_a_file_of_another_name_speaks_for_the_main_suite(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data.csv"))
        liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"))

        summary = liger_import(path=_write(tmp_path, "v2.csv", _without_line("all_benchmark_data.csv", 1)))

        assert (summary.unchanged, summary.withdrawn) == (11, 1)
        assert BenchmarkRun.objects.filter(withdrawn=True, labels__has_key="variant").count() == 0


@pytest.mark.django_db
class TestVariantRowsKeepTheirOwnIdentity:
    def test_variant_runs_are_labelled_with_their_suite(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"))

        run = BenchmarkRun.objects.filter(implementation__provider="liger_cutile").first()

        assert run.labels == {"liger_version": "0.8.0", "variant": "cutile"}
        assert run.manifest["items"][0]["metadata"]["labels"]["variant"] == "cutile"
        assert run.implementation.project == "Liger-Kernel"

    def test_no_grad_forward_is_its_own_timed_pass(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data_cutile.csv"))

        runs = BenchmarkRun.objects.filter(operation_mode="no-grad-forward")

        assert runs.count() == 2
        run = runs.get(workload__x_value=1024)
        assert run.external_id.startswith("cross_entropy/no-grad-forward/liger_triton/nvidia-b200/")
        assert run.get_operation_mode_display() == "Forward without autograd (torch.no_grad)"
        assert (run.rank, run.group_size) == (1, 1)

    def test_a_sweep_over_model_names_gives_each_model_its_own_run(self, tmp_path):
        summary = liger_import(path=_write(tmp_path, "all_benchmark_data_cutedsl.csv"))

        assert summary.created == 4
        ids = set(BenchmarkRun.objects.values_list("external_id", flat=True))
        assert (
            "cross_entropy/forward/liger_triton/nvidia-b200/llama_2_7b-batch1-seq2048/2026-07-05-21-00-19"
            in ids
        )
        assert (
            "cross_entropy/forward/liger_triton/nvidia-b200/llama_3_8b-batch1-seq2048/2026-07-05-21-00-19"
            in ids
        )
        ranked = BenchmarkRun.objects.filter(workload__slug="llama_2_7b-batch1-seq2048")
        assert sorted(ranked.values_list("implementation__provider", "rank")) == [
            ("liger_cutedsl", 2),
            ("liger_triton", 1),
        ]


@pytest.mark.django_db
class TestALaterReleaseListingTheSameRowsChangesNothing:
    def test_same_rows_under_a_new_release_keep_their_digests(self, tmp_path):
        liger_import(path=_write(tmp_path, "all_benchmark_data.csv"), release="0.8.4")
        before = dict(BenchmarkRun.objects.values_list("external_id", "digest"))

        summary = liger_import(path=_write(tmp_path, "all_benchmark_data.csv"), release="0.8.5")

        assert (summary.created, summary.unchanged) == (0, 12)
        assert dict(BenchmarkRun.objects.values_list("external_id", "digest")) == before
        assert list(SourceImport.objects.values_list("release", flat=True)) == ["0.8.5", "0.8.4"]
        assert {r.first_import.release for r in BenchmarkRun.objects.select_related("first_import")} == {
            "0.8.4"
        }
