"""The history import on real clones and hand-imported files (issue 36, finding 7): a clone missing a
blob that `git log --follow` would read falls back to a plain walk; a cut last line is refused; a
version's error names its commit and pull request, and says "run again to resume" only where a rerun
can help; the summary counts runs as they end up; a file imported by hand is dated by its rows or by
--published, never by the clock, so a release imported after it withdraws nothing wrongly."""

import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from registry.models import BenchmarkRun, SourceImport
from registry.services import ImportRejected
from registry.sources.liger import history
from registry.sources.liger.pypi import DataFile
from registry.sources.liger.services import BUNDLED_LIGER_HISTORY, liger_history_import, liger_import
from registry.sources.liger.sync import release_import
from tests.sources.liger.test_history_import import _folder, _index, _rows_of

pytestmark = pytest.mark.django_db


def git(repository: Path, *args, date=None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"})
    if date:
        env.update({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    done = subprocess.run(["git", "-C", str(repository), *args], check=True, env=env, capture_output=True)
    return done.stdout.decode()


def clone_missing_a_blob(tmp_path: Path, picked=("1", "10")) -> Path:
    """Liger-Kernel's shape: the data file's first version arrives in a commit that also removes a
    large test file (as #196 reorganised the benchmarks), so `git log --follow` compares that file's
    content for a rename; the clone lacks that one blob, as a partial clone or a mirror without large
    test files does."""
    repository = tmp_path / "Liger-Kernel"
    (repository / "test").mkdir(parents=True)
    git(repository, "init", "-q", "-b", "main")
    (repository / "test" / "large.bin").write_bytes(os.urandom(20_000))
    git(repository, "add", ".")
    git(repository, "commit", "-q", "-m", "Large test data (#100)", date="2024-09-01T00:00:00+00:00")
    data = repository / history.DATA_PATH
    data.parent.mkdir(parents=True)
    large = git(repository, "rev-parse", "HEAD:test/large.bin").strip()
    git(repository, "rm", "-q", "test/large.bin")
    for row in (r for r in _index() if r["n"] in picked):
        shutil.copy(BUNDLED_LIGER_HISTORY / row["file"], data)
        git(repository, "add", history.DATA_PATH)
        git(repository, "commit", "-q", "-m", row["subject"], date=row["author_date"])
    (repository / ".git" / "objects" / large[:2] / large[2:]).unlink()
    return repository


class TestAClonesMissingBlob:
    def test_git_log_follow_fails_on_it(self, tmp_path):
        repository = clone_missing_a_blob(tmp_path)
        done = subprocess.run(
            ["git", "-C", str(repository), "log", "--follow", "--format=%H", "--", history.DATA_PATH],
            capture_output=True,
        )
        assert done.returncode != 0 and b"unable to read" in done.stderr

    def test_the_versions_are_read_by_a_walk_without_follow(self, tmp_path):
        found = history.versions(clone_missing_a_blob(tmp_path))

        assert [v.pull_request for v in found] == [196, 406]
        assert found[0].data == (BUNDLED_LIGER_HISTORY / "01-b5672a15.csv").read_bytes()

    def test_the_whole_history_imports(self, tmp_path):
        summary = liger_history_import(path=clone_missing_a_blob(tmp_path))

        assert (summary.versions, summary.imported) == (2, 2)
        assert set(SourceImport.objects.values_list("pull_request", flat=True)) == {196, 406}


def cut(text: str) -> str:
    """The file with a new last row whose last field is cut short, and no final newline."""
    last = text.rstrip("\n").splitlines()[-1]
    fields = last.split(",")
    fields[-2] = "2099-01-01 00:00:00"  # a new timestamp: a new row, not a known one
    return text + ",".join(fields)[: -len(fields[-1])] + "0."


class TestACutLastLineIsRefused:
    def test_by_hand(self, tmp_path):
        path = tmp_path / "all_benchmark_data.csv"
        path.write_text(cut((BUNDLED_LIGER_HISTORY / "01-b5672a15.csv").read_text()))

        with pytest.raises(ImportRejected, match="last line"):
            liger_import(path=path)

        assert not BenchmarkRun.objects.exists()

    def test_in_a_history_folder(self, tmp_path):
        folder = _folder(tmp_path, picked=("1", "10"))
        version = folder / "10-90fb5e4a.csv"
        version.write_text(cut(version.read_text()))

        with pytest.raises(ImportRejected, match="0\\.") as refused:
            liger_history_import(path=folder)

        assert "90fb5e4a" in str(refused.value) and "#406" in str(refused.value)
        assert list(SourceImport.objects.values_list("pull_request", flat=True)) == [196]

    def test_upstreams_own_version_without_a_final_newline_still_imports(self, tmp_path):
        """#815 committed the file without a final newline, its last row whole."""
        assert not (BUNDLED_LIGER_HISTORY / "22-6a2c4913.csv").read_bytes().endswith(b"\n")

        summary = liger_history_import(path=_folder(tmp_path, picked=("22",)))

        assert summary.imported == 1
        assert BenchmarkRun.objects.count() == len(_rows_of("22"))


class TestAVersionsErrorSaysWhereAndWhetherToRunAgain:
    def test_a_bad_version_names_its_commit_and_pull_request_and_says_a_rerun_stops_there(self, tmp_path):
        folder = _folder(tmp_path, picked=("1", "10"))
        bad = folder / "10-90fb5e4a.csv"
        bad.write_text(bad.read_text().replace("speed", "sped", 1))

        with pytest.raises(CommandError) as refused:
            call_command("import_liger_history", str(folder))

        message = str(refused.value)
        assert "version 2 of 2" in message and "commit 90fb5e4a" in message and "#406" in message
        assert "1 version before it is imported" in message
        assert "run again to resume" not in message

    def test_a_path_that_is_no_history_says_nothing_of_resuming(self, tmp_path):
        with pytest.raises(CommandError) as refused:
            call_command("import_liger_history", str(tmp_path))

        assert "resume" not in str(refused.value) and "imported" not in str(refused.value)

    def test_the_first_version_refused_says_nothing_was_imported(self, tmp_path):
        folder = _folder(tmp_path, picked=("1", "10"))
        bad = folder / "01-b5672a15.csv"
        bad.write_text(bad.read_text().replace("speed", "sped", 1))

        with pytest.raises(CommandError) as refused:
            call_command("import_liger_history", str(folder))

        assert "nothing was imported" in str(refused.value)
        assert "#196" in str(refused.value) and "run again" not in str(refused.value)

    def test_a_version_git_cannot_read_is_named_and_a_rerun_resumes(self, tmp_path):
        repository = clone_missing_a_blob(tmp_path, picked=("1", "10"))
        second = git(repository, "rev-parse", f"HEAD:{history.DATA_PATH}").strip()
        (repository / ".git" / "objects" / second[:2] / second[2:]).unlink()

        with pytest.raises(CommandError) as refused:
            call_command("import_liger_history", str(repository))

        message = str(refused.value)
        assert "#406" in message and "1 version before it is imported" in message
        assert "fetch the missing objects" in message


class TestTheSummaryCountsRunsAsTheyEndUp:
    def test_after_a_release_then_the_history(self, tmp_path):
        """Version 20's file as a release, then versions 1 to 19: each older version re-points runs
        the release had superseded already; summed version by version that printed 150."""
        release = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / next(r["file"] for r in _index() if r["n"] == "20"), release)
        liger_import(path=release, release="0.6.0", as_of=datetime(2026, 1, 1, tzinfo=UTC))
        superseded_before = BenchmarkRun.objects.filter(superseded_by__isnull=False).count()
        withdrawn_before = BenchmarkRun.objects.filter(withdrawn=True).count()

        summary = liger_history_import(path=_folder(tmp_path / "h", picked=tuple(map(str, range(1, 20)))))

        superseded = BenchmarkRun.objects.filter(superseded_by__isnull=False).count() - superseded_before
        withdrawn = BenchmarkRun.objects.filter(withdrawn=True).count() - withdrawn_before
        assert superseded == 120
        assert (summary.totals.superseded, summary.totals.withdrawn) == (superseded, withdrawn)
        assert f"{superseded} superseded, {withdrawn} withdrawn" in str(summary)


class TestAFileImportedByHandIsDatedByItsRows:
    def test_its_date_is_its_newest_row(self, tmp_path):
        path = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "10-90fb5e4a.csv", path)

        liger_import(path=path)

        newest = max(BenchmarkRun.objects.values_list("observed_at", flat=True))
        assert SourceImport.objects.get().as_of == newest

    def test_published_gives_the_date(self, tmp_path):
        path = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "01-b5672a15.csv", path)

        call_command("import_liger", str(path), "--published", "2024-09-04")

        assert SourceImport.objects.get().as_of == datetime(2024, 9, 4, tzinfo=UTC)

    def test_a_bad_published_date_is_refused(self, tmp_path):
        with pytest.raises(CommandError, match="--published"):
            call_command("import_liger", str(tmp_path / "x.csv"), "--published", "yesterday")

    def test_a_later_release_after_it_withdraws_nothing_wrongly(self, tmp_path):
        """The README's order: the bundled file by hand, then the newest release from PyPI (here
        version 14's file, published after version 13's rows, as 0.8.5 after 0.8.4's)."""
        path = tmp_path / "all_benchmark_data.csv"
        shutil.copy(BUNDLED_LIGER_HISTORY / "13-1f6fbb19.csv", path)
        liger_import(path=path)
        newer = (BUNDLED_LIGER_HISTORY / "14-d63b888d.csv").read_bytes()
        published = datetime.fromisoformat(next(r["author_date"] for r in _index() if r["n"] == "14"))

        (result,) = release_import(
            release="0.5.0",
            files=[DataFile(name="all_benchmark_data.csv", data=newer)],
            directory=tmp_path,
            as_of=published,
        )

        assert result["created"] > 0
        assert result["withdrawn"] == 30  # the 30 KTO keys version 14 dropped, and only those
        assert not BenchmarkRun.objects.filter(withdrawn=True, first_import__release="0.5.0").exists()
        assert BenchmarkRun.objects.current().count() == len(_rows_of("14"))
