"""import_liger_history: every version of the data file, from a folder or a git repository, in
order, all or nothing per version, and the same runs whichever order history and releases come in."""

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from registry.models import BenchmarkRun, Change, SourceImport
from registry.services import ImportRejected
from registry.sources.liger import history
from registry.sources.liger.services import BUNDLED_LIGER_HISTORY, liger_history_import, liger_import

pytestmark = pytest.mark.django_db

# Versions 1 (#196, the first file), 10 (#406: fused linear cross entropy rerun, 24 values
# replaced), 13 (#324) and 14 (#589: KTO's configuration changed, 30 keys dropped and 30 added).
PICKED = ("1", "10", "13", "14")


def _index() -> list[dict]:
    with (BUNDLED_LIGER_HISTORY / "INDEX.tsv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _folder(tmp_path: Path, picked=PICKED) -> Path:
    folder = tmp_path / "history"
    folder.mkdir(parents=True)
    rows = [row for row in _index() if row["n"] in picked]
    with (folder / "INDEX.tsv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        shutil.copy(BUNDLED_LIGER_HISTORY / row["file"], folder / row["file"])
    return folder


def _git_repository(tmp_path: Path, picked=PICKED) -> Path:
    """A repository shaped like Liger-Kernel's, one commit per picked version, dated and named as
    upstream's; an unrelated commit in between must not count as a version."""
    repository = tmp_path / "Liger-Kernel"
    data = repository / history.DATA_PATH
    data.parent.mkdir(parents=True)

    def git(*args, date=None):
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
        env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"})
        if date:
            env.update({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        subprocess.run(["git", "-C", str(repository), *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main")
    for row in (r for r in _index() if r["n"] in picked):
        shutil.copy(BUNDLED_LIGER_HISTORY / row["file"], data)
        git("add", history.DATA_PATH)
        git("commit", "-q", "-m", row["subject"], date=row["author_date"])
        (repository / "README.md").write_text(row["n"])
        git("add", "README.md")
        git("commit", "-q", "-m", "Docs (#1)", date=row["author_date"])
    return repository


def registry_empty() -> None:
    Change.objects.all().delete()
    # Withdrawn too, so that no two runs of one target are current for a moment (the database
    # refuses it: one_current_run_per_target) while the pointers are cleared before the delete.
    BenchmarkRun.objects.update(superseded_by=None, withdrawn=True)
    BenchmarkRun.objects.all().delete()
    SourceImport.objects.all().delete()


def runs() -> dict:
    return {
        external_id: (digest, withdrawn, superseded, pr)
        for external_id, digest, withdrawn, superseded, pr in BenchmarkRun.objects.values_list(
            "external_id", "digest", "withdrawn", "superseded_by__external_id", "origin__pull_request"
        )
    }


def current() -> set:
    return set(BenchmarkRun.objects.current().values_list("external_id", "digest", "rank", "group_size"))


def _rows_of(number: str) -> list[dict]:
    name = next(r["file"] for r in _index() if r["n"] == number)
    with (BUNDLED_LIGER_HISTORY / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class TestImportFromAFolderOrGit:
    def test_a_folder_and_a_git_repository_of_the_same_versions_give_the_same_runs(
        self, tmp_path, django_db_blocker
    ):
        summary = liger_history_import(path=_folder(tmp_path))
        assert (summary.versions, summary.imported) == (4, 4)
        from_folder = runs()
        registry_empty()
        summary = liger_history_import(path=_git_repository(tmp_path))
        assert (summary.versions, summary.imported) == (4, 4)
        assert runs() == from_folder

    def test_versions_come_oldest_first_with_commit_date_and_pull_request(self, tmp_path):
        found = history.versions(_git_repository(tmp_path))
        assert [v.pull_request for v in found] == [196, 406, 324, 589]
        assert [v.date.isoformat() for v in found] == [r["author_date"] for r in _index() if r["n"] in PICKED]
        assert found[0].data == (BUNDLED_LIGER_HISTORY / "01-b5672a15.csv").read_bytes()

    def test_every_value_ever_published_is_a_run(self, tmp_path):
        liger_history_import(path=_folder(tmp_path))
        keys = {
            tuple(
                r[c]
                for c in (
                    "kernel_name",
                    "kernel_provider",
                    "kernel_operation_mode",
                    "metric_name",
                    "x_value",
                    "extra_benchmark_config_str",
                    "gpu_name",
                    "timestamp",
                )
            )
            for n in PICKED
            for r in _rows_of(n)
        }
        assert BenchmarkRun.objects.count() == len(keys)
        assert BenchmarkRun.objects.current().count() == len(_rows_of("14"))

    def test_replaced_rows_are_superseded_and_dropped_rows_withdrawn(self, tmp_path):
        liger_history_import(path=_folder(tmp_path))
        replaced = BenchmarkRun.objects.filter(superseded_by__isnull=False)
        assert replaced.count() == 24
        assert set(replaced.values_list("kernel__slug", flat=True)) == {"fused_linear_cross_entropy"}
        assert set(replaced.values_list("superseded_by__origin__pull_request", flat=True)) == {406}
        withdrawn = BenchmarkRun.objects.filter(withdrawn=True)
        assert withdrawn.count() == 30
        assert set(withdrawn.values_list("kernel__slug", flat=True)) == {"kto_loss"}

    def test_each_run_records_the_commit_that_first_published_it(self, tmp_path):
        liger_history_import(path=_folder(tmp_path))
        first = BenchmarkRun.objects.filter(observed_at__date="2024-09-03").select_related("origin")[0]
        assert first.origin.upstream_commit == "b5672a153b7b314a367996fc6cd60a57aeda4ccc"
        assert first.origin.pull_request == 196
        assert first.origin.as_of.isoformat() == "2024-09-04T05:29:00+00:00"
        assert "geglu" in SourceImport.objects.get(pull_request=196).kernels
        # Version 10 follows version 1 here: it publishes every kernel added in between too.
        changed = SourceImport.objects.get(pull_request=406).kernels
        assert "fused_linear_cross_entropy" in changed and "geglu" not in changed
        # Each kernel once, in order: the kernels its new runs are of.
        for record in SourceImport.objects.exclude(kernels=[]):
            new = BenchmarkRun.objects.filter(first_import=record).values_list("kernel__slug", flat=True)
            assert record.kernels == sorted(set(new)), record.filename


class TestImportIsIdempotentAndOrderFree:
    def test_a_second_import_changes_nothing(self, tmp_path):
        liger_history_import(path=_folder(tmp_path))
        before, imports = runs(), SourceImport.objects.count()
        again = liger_history_import(path=_folder(tmp_path / "again"))
        assert (again.imported, again.already, again.totals.created) == (0, 4, 0)
        assert runs() == before
        assert SourceImport.objects.count() == imports

    def test_history_before_or_after_a_release_leaves_the_same_current_runs(self, tmp_path):
        """The release (version 14's file, which drops 30 keys) is newer than the history."""
        release = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "14-d63b888d.csv", release)
        liger_history_import(path=_folder(tmp_path / "a", picked=("1", "10", "13")))
        liger_import(path=release, release="0.5.0")
        history_first, all_first = current(), runs()
        registry_empty()
        liger_import(path=release, release="0.5.0")
        liger_history_import(path=_folder(tmp_path / "b", picked=("1", "10", "13")))
        assert current() == history_first
        assert len(history_first) == len(_rows_of("14"))
        assert BenchmarkRun.objects.filter(withdrawn=True).count() == 30
        assert {k: v[:3] for k, v in runs().items()} == {k: v[:3] for k, v in all_first.items()}

    def test_a_row_seen_in_a_release_and_in_the_history_is_one_run_with_the_commit(self, tmp_path):
        release = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "01-b5672a15.csv", release)
        liger_import(path=release, release="0.2.1")
        count = BenchmarkRun.objects.count()
        summary = liger_history_import(path=_folder(tmp_path / "h", picked=("1",)))
        assert summary.totals.created == 0
        assert BenchmarkRun.objects.count() == count
        assert set(BenchmarkRun.objects.values_list("origin__pull_request", flat=True)) == {196}


class TestAVersionIsImportedWholeOrNotAtAll:
    def test_a_bad_version_is_refused_and_the_versions_before_it_stay(self, tmp_path):
        folder = _folder(tmp_path)
        bad = folder / "10-90fb5e4a.csv"
        bad.write_text(bad.read_text(encoding="utf-8").replace("speed", "sped", 1), encoding="utf-8")
        with pytest.raises(ImportRejected):
            liger_history_import(path=folder)
        assert list(SourceImport.objects.values_list("pull_request", flat=True)) == [196]
        assert BenchmarkRun.objects.count() == len(_rows_of("1"))

    def test_the_command_imports_and_says_what_it_did(self, tmp_path, capsys):
        call_command("import_liger_history", str(_folder(tmp_path)))
        assert "4 versions (4 imported, 0 already imported)" in capsys.readouterr().out

    def test_the_command_refuses_a_path_that_is_no_history(self, tmp_path):
        with pytest.raises(CommandError, match="neither a git repository nor a folder"):
            call_command("import_liger_history", str(tmp_path))
