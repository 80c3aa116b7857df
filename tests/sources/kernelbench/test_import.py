import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from registry.models import BenchmarkRun, Environment, SourceImport, Workload
from registry.services import ImportRejected
from registry.sources.kernelbench import services as kb_services
from registry.sources.kernelbench.services import kernelbench_import
from tests.sources.kernelbench.conftest import commit_of, git_clone_of, row, two_versions, write_folder

pytestmark = pytest.mark.django_db


def runs():
    return BenchmarkRun.objects.filter(source__slug="kernelbench")


def state():
    """Everything an import writes, to compare before and after."""
    return (
        sorted(
            runs().values_list("external_id", "digest", "withdrawn", "superseded_by", "rank", "group_size")
        ),
        SourceImport.objects.count(),
        Workload.objects.count(),
    )


class TestVersionsAreImportedOldestFirst:
    def test_a_changed_value_supersedes_a_missing_key_withdraws_a_moved_file_keeps_its_runs(self, kb_folder):
        summary = kernelbench_import(path=kb_folder)
        assert (summary.versions, summary.imported) == (2, 2)
        assert runs().count() == 7
        assert runs().current().count() == 5
        old, new = (
            runs()
            .filter(provider="eager", kernel__slug__contains="l1-1-", gpu_product="NVIDIA L40S")
            .order_by("observed_at")
        )
        assert old.superseded_by_id == new.pk and not old.withdrawn
        assert (old.median, new.median) == (1.0, 1.1)
        gone = runs().get(provider="compile-inductor-default", kernel__slug__contains="relu")
        assert gone.withdrawn and gone.superseded_by_id is None and gone.rank is None
        # baseline_time_modal.json moved to old/ unchanged: its runs are those of the first commit.
        moved = runs().filter(labels__host="modal")
        assert moved.count() == 2 and all(r.is_current for r in moved)
        assert {r.first_import.upstream_commit for r in moved} == {commit_of(1)}

    def test_each_run_records_the_commit_date_and_pull_request_that_first_published_it(self, kb_folder):
        kernelbench_import(path=kb_folder)
        newest = runs().get(median=1.1)
        assert newest.first_import.upstream_commit == commit_of(2)
        assert newest.first_import.pull_request == 7
        assert newest.observed_at.isoformat() == "2025-01-20T03:25:46+00:00"
        assert runs().get(median=1.0).first_import.pull_request is None

    def test_the_rows_own_hardware_names_the_gpu_where_one_file_mixes_two(self, kb_folder):
        kernelbench_import(path=kb_folder)
        products = set(runs().filter(labels__host="modal").values_list("environment__product", flat=True))
        assert products == {"NVIDIA A100 SXM4 40GB", "NVIDIA A100 SXM4 80GB"}
        assert Environment.objects.filter(slug="nvidia-a100-sxm4-40gb").exists()

    def test_eager_and_compile_rank_in_one_group_per_problem_and_gpu(self, kb_folder):
        kernelbench_import(path=kb_folder)
        group = runs().current().filter(kernel__slug__contains="l1-1-", gpu_product="NVIDIA L40S")
        assert sorted(group.values_list("provider", "rank", "group_size")) == [
            ("compile-inductor-default", 1, 2),
            ("eager", 2, 2),
        ]

    def test_the_record_states_mean_std_min_max_and_trials_and_no_quantiles(self, kb_folder):
        kernelbench_import(path=kb_folder)
        run = runs().get(median=1.1)
        results = run.manifest["items"][0]["spec"]["results"]
        assert results == {
            "statistic": "mean",
            "mean": 1.1,
            "std": 0.01,
            "min": 1.045,
            "max": 1.21,
            "numTrials": 100,
        }
        assert run.protocol.statistic == "mean"
        workload = run.workload
        assert workload.parameters == {"N": 4096}
        assert [t["shape"] for t in workload.tensors] == [[4096, 4096], [4096, 4096]]
        assert "torch.matmul(A, B)" in workload.text
        assert workload.spec["problem"]["sha256"].startswith("sha256:")


class TestASecondImportChangesNothing:
    def test_again_from_the_same_folder(self, kb_folder):
        kernelbench_import(path=kb_folder)
        before = state()
        summary = kernelbench_import(path=kb_folder)
        assert (summary.imported, summary.already, summary.created) == (0, 2, 0)
        assert state() == before

    def test_again_from_a_git_clone(self, tmp_path):
        clone = git_clone_of(tmp_path / "clone", two_versions())
        kernelbench_import(path=clone)
        before = state()
        summary = kernelbench_import(path=clone)
        assert (summary.imported, summary.already, summary.created) == (0, 2, 0)
        assert state() == before


class TestAGitClone:
    def test_gives_the_same_runs_as_the_folder(self, tmp_path):
        clone = git_clone_of(tmp_path / "clone", two_versions())
        summary = kernelbench_import(path=clone)
        assert summary.versions == 2
        assert runs().count() == 7 and runs().current().count() == 5
        assert runs().get(median=1.1).first_import.pull_request == 7


class TestAMalformedFileIsRefusedAndNothingIsWritten:
    def bad_second_version(self, tmp_path, document):
        versions = two_versions()
        versions[1]["files"]["results/timing/L40S/baseline_time_torch.json"] = document
        return write_folder(tmp_path / "bad", versions)

    @pytest.mark.parametrize(
        ("document", "place", "problem"),
        [
            (b'{"level1": {"19_ReLU.py": {"mean": 1,', "line 1, column", "not JSON"),
            (
                {"level1": {"19_ReLU.py": {**row(0.03), "mean": -1}}},
                "level1 / 19_ReLU.py / mean",
                "not a finite number",
            ),
            (
                {"level1": {"19_ReLU.py": {**row(0.03), "num_trials": 0}}},
                "level1 / 19_ReLU.py / num_trials",
                "positive",
            ),
            (
                {"level1": {"19_ReLU.py": {**row(0.03), "hardware": ""}}},
                "level1 / 19_ReLU.py / hardware",
                "GPU",
            ),
            ({"level1": {"19_ReLU.py": {**row(0.03), "min": 5}}}, "level1 / 19_ReLU.py", "min 5 <= mean"),
            ({"lvl1": {}}, "'lvl1'", "levelN"),
        ],
    )
    def test_names_the_path_the_commit_and_the_place(self, tmp_path, document, place, problem):
        folder = self.bad_second_version(tmp_path, document)
        with pytest.raises(ImportRejected) as refused:
            kernelbench_import(path=folder)
        message = str(refused.value)
        assert "results/timing/L40S/baseline_time_torch.json" in message
        assert commit_of(2) in message
        assert place in message and problem in message
        # The first version was fine, and still nothing is written: every version is checked first.
        assert runs().count() == 0 and SourceImport.objects.count() == 0

    def test_the_command_says_so_and_exits_non_zero(self, tmp_path):
        folder = self.bad_second_version(tmp_path, b"[]")
        with pytest.raises(CommandError, match="nothing was written.*expected an object of levels"):
            call_command("import_kernelbench", str(folder))

    def test_a_non_finite_figure_is_refused(self, tmp_path):
        text = json.dumps({"level1": {"19_ReLU.py": row(0.03)}}).replace("0.03", "NaN", 1).encode()
        with pytest.raises(ImportRejected, match="NaN is not a number"):
            kernelbench_import(path=self.bad_second_version(tmp_path, text))


class TestEachVersionIsAllOrNothing:
    def test_a_failure_while_writing_the_second_version_keeps_the_first_whole(self, kb_folder, monkeypatch):
        real = kb_services._superseded_by_write

        def fail_on_second(superseded):
            if SourceImport.objects.filter(upstream_commit=commit_of(2)).exists():
                raise RuntimeError("disk full")
            return real(superseded)

        monkeypatch.setattr(kb_services, "_superseded_by_write", fail_on_second)
        with pytest.raises(RuntimeError):
            kernelbench_import(path=kb_folder)
        assert list(SourceImport.objects.values_list("upstream_commit", flat=True)) == [commit_of(1)]
        assert runs().count() == 6 and runs().current().count() == 6
        monkeypatch.setattr(kb_services, "_superseded_by_write", real)
        summary = kernelbench_import(path=kb_folder)  # resumes with the second version
        assert (summary.imported, summary.already) == (1, 1)
        assert runs().count() == 7


class TestStepsBetweenPublishedMeansAreJudgedByWelchsTest:
    def test_a_new_mean_that_supersedes_the_old_is_a_change_when_welchs_test_says_so(self, kb_folder):
        from scipy.stats import ttest_ind_from_stats

        from registry.models import Change

        kernelbench_import(path=kb_folder)
        old = runs().get(median=1.0)
        assert old.superseded_by.median == 1.1  # +10%, std 0.01 over 100 calls each side
        (change,) = Change.objects.filter(before=old)
        assert (change.after_id, change.kind) == (old.superseded_by_id, "regression")
        expected = ttest_ind_from_stats(1.0, 0.01, 100, 1.1, 0.01, 100, equal_var=False).pvalue
        assert change.p_value == pytest.approx(expected)
        assert "Welch's t-test" in change.evidence and "100 and 100 calls" in change.evidence
        # Unchanged figures, a withdrawn key and a moved file are no step.
        assert Change.objects.filter(kernel__runs__source__slug="kernelbench").distinct().count() == 1

    def test_a_step_the_spread_does_not_confirm_is_uncertain(self, tmp_path):
        from registry.models import Change

        versions = two_versions()
        for version in versions:
            timing = version["files"]["results/timing/L40S/baseline_time_torch.json"]["level1"]
            mean = timing["1_Square_matrix_multiplication_.py"]["mean"]
            timing["1_Square_matrix_multiplication_.py"] = row(mean, std=2.0, trials=5)
        kernelbench_import(path=write_folder(tmp_path / "kb", versions))
        (change,) = Change.objects.filter(before=runs().get(median=1.0))
        assert change.kind == "uncertain" and change.p_value > 0.01

    def test_a_second_detection_changes_nothing(self, kb_folder):
        from registry.models import Change
        from registry.services.changes import changes_detect

        kernelbench_import(path=kb_folder)
        before = list(Change.objects.values_list("pk", "kind"))
        assert changes_detect() == {"created": 0, "removed": 0}
        assert list(Change.objects.values_list("pk", "kind")) == before
