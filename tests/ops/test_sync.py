"""`manage.py sync_liger`: a release's data files from a (local, PyPI-shaped) source distribution."""

import pytest
from django.core import mail
from django.core.management import CommandError, call_command

from attestations.notifications import sync_failure_notify
from registry.models import BenchmarkRun, SourceImport, SourceSync
from registry.sources.liger import pypi as pypi_client
from registry.sources.liger.sync import liger_sync
from registry.sources.liger.tasks import sync_liger_task
from tests.ops.conftest import fixture_bytes, release_files

MAIN_ROWS, CUTILE_ROWS, CUTEDSL_ROWS = 12, 10, 4
REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)


def _main_file_changed() -> bytes:
    """0.8.6: drops the first Liger GeGLU row and re-measures the second (new timestamp)."""
    lines = fixture_bytes("all_benchmark_data.csv").decode().splitlines(keepends=True)
    header, dropped, remeasured, rest = lines[0], lines[1], lines[2], lines[3:]
    assert dropped.startswith("geglu,liger,backward") and "2024-09-03 15:38:37" in remeasured
    return (
        header + remeasured.replace("2024-09-03 15:38:37", "2026-08-01 10:00:00") + "".join(rest)
    ).encode()


@pytest.mark.django_db
class TestSyncImportsEveryDataFileOfARelease:
    def test_command_imports_main_and_variant_files_with_release_and_digest(self, pypi, capsys):
        pypi.add("0.8.5")

        call_command("sync_liger")

        sync = SourceSync.objects.get()
        assert (sync.status, sync.release) == ("imported", "0.8.5")
        assert [f["filename"] for f in sync.files] == [
            "all_benchmark_data.csv",
            "all_benchmark_data_cutedsl.csv",
            "all_benchmark_data_cutile.csv",
        ]
        imports = {i.filename: i for i in SourceImport.objects.all()}
        assert {name: i.created for name, i in imports.items()} == {
            "all_benchmark_data.csv": MAIN_ROWS,
            "all_benchmark_data_cutile.csv": CUTILE_ROWS,
            "all_benchmark_data_cutedsl.csv": CUTEDSL_ROWS,
        }
        assert {i.release for i in imports.values()} == {"0.8.5"}
        from registry.digests import file_digest

        assert imports["all_benchmark_data_cutile.csv"].file_digest == file_digest(
            fixture_bytes("all_benchmark_data_cutile.csv")
        )
        assert BenchmarkRun.objects.count() == MAIN_ROWS + CUTILE_ROWS + CUTEDSL_ROWS
        assert BenchmarkRun.objects.filter(withdrawn=True).count() == 0
        assert "Imported liger-kernel 0.8.5" in capsys.readouterr().out

    def test_each_run_records_the_release_it_came_from(self, pypi):
        pypi.add("0.8.5")

        liger_sync()

        run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
        assert run.first_import.release == "0.8.5"
        assert (run.rank, run.group_size) == (2, 2)
        cutile_run = BenchmarkRun.objects.filter(labels__variant="cutile").first()
        assert cutile_run.first_import.filename == "all_benchmark_data_cutile.csv"

    def test_a_named_release_is_imported_not_the_newest(self, pypi):
        pypi.add("0.8.5")
        pypi.add("0.8.6", {**release_files(), "all_benchmark_data.csv": _main_file_changed()})

        sync = liger_sync(version="0.8.5")

        assert sync.release == "0.8.5"
        assert set(SourceImport.objects.values_list("release", flat=True)) == {"0.8.5"}
        # A mirror has no per-version endpoint: the release is found in the project document.
        assert "/pypi/liger-kernel/json" in pypi.requests
        assert "/packages/liger_kernel-0.8.5.tar.gz" in pypi.downloads()

    def test_the_beat_task_syncs_the_newest_release(self, pypi):
        pypi.add("0.8.5")

        result = sync_liger_task.apply().get()

        assert result["status"] == "imported" and result["release"] == "0.8.5"
        assert BenchmarkRun.objects.count() == MAIN_ROWS + CUTILE_ROWS + CUTEDSL_ROWS


@pytest.mark.django_db
class TestSyncIsSafeToRepeat:
    def test_a_release_already_imported_is_not_downloaded_again(self, pypi):
        pypi.add("0.8.5")
        liger_sync()
        assert len(pypi.downloads()) == 1

        second = liger_sync()

        assert second.status == "up-to-date"
        assert len(pypi.downloads()) == 1
        assert SourceImport.objects.count() == 3

    def test_force_reimports_and_changes_nothing(self, pypi):
        pypi.add("0.8.5")
        liger_sync()
        digests = dict(BenchmarkRun.objects.values_list("external_id", "digest"))

        forced = liger_sync(force=True)

        assert forced.status == "imported"
        assert [f["unchanged"] for f in forced.files] == [MAIN_ROWS, CUTEDSL_ROWS, CUTILE_ROWS]
        assert dict(BenchmarkRun.objects.values_list("external_id", "digest")) == digests


@pytest.mark.django_db
class TestANewReleaseSupersedesAndWithdrawsWithinItsOwnFile:
    def test_next_release_withdraws_a_dropped_row_and_supersedes_a_remeasured_one(self, pypi):
        pypi.add("0.8.5")
        liger_sync()
        pypi.add("0.8.6", {**release_files(), "all_benchmark_data.csv": _main_file_changed()})

        sync = liger_sync()

        main = next(f for f in sync.files if f["filename"] == "all_benchmark_data.csv")
        assert (main["created"], main["superseded"], main["withdrawn"]) == (1, 1, 1)
        cutile = next(f for f in sync.files if f["filename"] == "all_benchmark_data_cutile.csv")
        assert (cutile["unchanged"], cutile["withdrawn"], cutile["superseded"]) == (CUTILE_ROWS, 0, 0)
        withdrawn = BenchmarkRun.objects.get(withdrawn=True)
        assert withdrawn.external_id.startswith("geglu/backward/liger/")
        assert BenchmarkRun.objects.filter(labels__variant="cutile", withdrawn=True).count() == 0
        new = BenchmarkRun.objects.get(external_id__endswith="2026-08-01-10-00-00")
        assert new.first_import.release == "0.8.6"
        assert new.supersedes.count() == 1


@pytest.mark.django_db
class TestAFailedSyncLeavesTheRegistryUntouched:
    def test_a_malformed_variant_file_rolls_back_the_whole_release(self, pypi, celery_eager, moderator):
        broken = fixture_bytes("all_benchmark_data_cutile.csv").replace(
            b"liger_cutile,full,speed,ms", b"liger_cutile,full,speed,s", 1
        )
        pypi.add("0.8.5", {**release_files(), "all_benchmark_data_cutile.csv": broken})

        with pytest.raises(CommandError, match="all_benchmark_data_cutile.csv: line 6"):
            call_command("sync_liger")

        sync = SourceSync.objects.get()
        assert sync.status == "failed"
        assert "unit 's' does not match" in sync.error
        assert BenchmarkRun.objects.count() == 0
        assert SourceImport.objects.count() == 0

    def test_moderators_are_mailed_after_the_failure_is_recorded(
        self, pypi, celery_eager, moderator, contributor, django_capture_on_commit_callbacks
    ):
        pypi.add("0.8.5", sha256="f" * 64)

        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            sync = liger_sync()

        # One callback sends the mail; the page cache's generation bump (registry.cache) aside.
        assert len([c for c in callbacks if c.__module__ != "registry.cache"]) == 1
        sync.refresh_from_db()
        assert sync.status == "failed" and "does not match PyPI's" in sync.error
        assert sync.notified_at is not None
        assert len(mail.outbox) == 1
        assert mail.outbox[0].to == ["mod@example.org"]
        assert "registry is unchanged" in mail.outbox[0].body
        assert BenchmarkRun.objects.count() == 0

    def test_no_mail_is_sent_before_the_transaction_commits(self, pypi, celery_eager, moderator):
        pypi.add("0.8.5", sha256="f" * 64)

        liger_sync()  # the test's transaction never commits, so neither does the failure

        assert len(mail.outbox) == 0

    def test_an_unknown_release_is_a_recorded_failure(self, pypi):
        pypi.add("0.8.5")

        sync = liger_sync(version="9.9.9")

        assert sync.status == "failed" and "9.9.9 is not a release the index lists" in sync.error
        assert pypi.downloads() == []

    def test_an_archive_without_benchmark_data_fails(self, pypi):
        pypi.add("0.8.5", {"all_benchmark_data_cutile.csv": fixture_bytes("all_benchmark_data_cutile.csv")})

        sync = liger_sync()

        assert sync.status == "failed" and "no benchmark/data/all_benchmark_data.csv" in sync.error
        assert BenchmarkRun.objects.count() == 0

    def test_a_corrupt_archive_fails(self, pypi):
        pypi.add("0.8.5", archive=b"not a tarball at all")

        sync = liger_sync()

        assert sync.status == "failed" and "not a readable .tar.gz" in sync.error

    def test_notifying_twice_mails_once(self, pypi, moderator):
        pypi.add("0.8.5", sha256="f" * 64)
        sync = liger_sync()

        assert sync_failure_notify(sync_pk=sync.pk) == 1
        assert sync_failure_notify(sync_pk=sync.pk) == 0

        assert len(mail.outbox) == 1


@pytest.mark.django_db
class TestSyncReadsAMirrorOfTheIndex:
    def test_relative_file_urls_are_resolved_against_the_project_document(self, pypi):
        pypi.add("0.8.5")

        release = pypi_client.release_find()

        assert release.url == f"{pypi.url}/packages/liger_kernel-0.8.5.tar.gz"
        assert release.uploaded_at is not None
        assert liger_sync().status == "imported"

    def test_the_per_version_endpoint_is_never_asked(self, pypi):
        pypi.add("0.8.5")
        pypi.add("0.8.6")

        assert pypi_client.release_find(version="0.8.5").filename == "liger_kernel-0.8.5.tar.gz"
        assert pypi.requests == ["/pypi/liger-kernel/json"]

    def test_a_release_the_index_does_not_list_is_refused(self, pypi):
        pypi.add("0.8.5")

        with pytest.raises(pypi_client.PyPIError, match="0.9.9 is not a release the index lists"):
            pypi_client.release_find(version="0.9.9")

    def test_the_import_is_dated_by_the_release(self, pypi):
        pypi.add("0.8.5")

        liger_sync()

        uploaded = pypi.releases["0.8.5"]["uploaded"]
        assert {i.as_of.isoformat() for i in SourceImport.objects.all()} == {uploaded.replace("Z", "+00:00")}


def _index_reachable() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/pypi/liger-kernel/json", timeout=10).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _index_reachable(), reason="the package index (https://pypi.org) cannot be reached")
class TestTheRealIndex:
    """What a new user's `sync_liger` meets: the index this machine reaches (PyPI or its mirror)."""

    def test_the_newest_and_a_named_release_resolve_to_a_downloadable_sdist(self, settings):
        settings.PYPI_URL = "https://pypi.org"
        newest = pypi_client.release_find()
        named = pypi_client.release_find(version="0.8.5")
        assert named.filename == "liger_kernel-0.8.5.tar.gz"
        assert named.url.startswith("https://") and "/../" not in named.url
        assert newest.url.startswith("https://")
        with pypi_client._open(named.url) as response:
            assert response.status == 200
