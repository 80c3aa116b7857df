"""Importing the history of Liger-Kernel's data file: every value the source ever published."""

from pathlib import Path

from registry.models import BenchmarkRun, SourceImport
from registry.services.imports import (
    BUNDLED_LIGER_CSV,
    ImportRejected,
    ImportSummary,
    UpstreamVersion,
    VersionsSummary,
    liger_import,
    liger_version_import,
)
from registry.sources import liger as liger_paths
from registry.sources.liger import history
from registry.sources.liger.importer import MAIN_FILE, SOURCE

BUNDLED_LIGER_HISTORY = liger_paths.BUNDLED_HISTORY


class VersionRefused(ImportRejected):
    """One version could not be imported: it names the version, its commit and pull request, what
    the versions before it became, and whether running again can help."""

    def __init__(self, *, version: history.Version, number: int, count: int, detail: str, unreadable: bool):
        where = f"version {number} of {count} (commit {version.commit[:8]}"
        where += f", #{version.pull_request})" if version.pull_request else ")"
        before = (
            "nothing was imported"
            if number == 1
            else f"{number - 1} version{' before it is' if number == 2 else 's before it are'} imported"
        )
        advice = (
            "fetch the missing objects (git fetch, or a clone without --filter), then run again to resume"
            if unreadable
            else "a rerun stops at this version again until its file is mended"
        )
        super().__init__(f"{where}: {detail} ({before}; {advice})")


def liger_history_import(*, path: Path | str, progress=None) -> VersionsSummary:
    """Every version of the data file, oldest first, each in its own transaction (all of a
    version or none of it). A version whose commit is already imported is skipped, so a second
    run changes nothing and an interrupted one resumes. The summary's superseded and withdrawn
    counts are the runs that end so, counted after the last version (a version older than a
    release already imported re-points runs that were superseded already)."""
    versions = history.versions(path)
    done = set(
        SourceImport.objects.filter(
            source__slug=SOURCE["slug"], upstream_commit__in=[v.commit for v in versions]
        ).values_list("upstream_commit", flat=True)
    )
    before = _ended(), _withdrawn()
    summary = VersionsSummary(versions=len(versions))
    for number, version in enumerate(versions, start=1):
        if version.commit in done:
            summary.already += 1
            continue
        imported = _version_import(version, number, len(versions), progress)
        summary.imported += 1
        for name, value in imported.as_dict().items():
            setattr(summary.totals, name, getattr(summary.totals, name) + value)
    summary.totals.superseded = _ended() - before[0]
    summary.totals.withdrawn = _withdrawn() - before[1]
    return summary


def _ended() -> int:
    return BenchmarkRun.objects.filter(source__slug=SOURCE["slug"], superseded_by__isnull=False).count()


def _withdrawn() -> int:
    return BenchmarkRun.objects.filter(source__slug=SOURCE["slug"], withdrawn=True).count()


def _version_import(version: history.Version, number: int, count: int, progress) -> ImportSummary:
    upstream = UpstreamVersion(
        commit=version.commit, date=version.date, pull_request=version.pull_request, subject=version.subject
    )
    refused = {"version": version, "number": number, "count": count}
    try:
        data = version.data
    except history.HistoryError as exc:
        raise VersionRefused(**refused, detail=str(exc), unreadable=True) from None
    try:
        return liger_version_import(data=data, filename=MAIN_FILE, upstream=upstream, progress=progress)
    except ImportRejected as exc:
        raise VersionRefused(**refused, detail=str(exc), unreadable=False) from None


def history_last_date(path: Path | str = BUNDLED_LIGER_HISTORY):
    """The date of the newest version: the bundled file is that version."""
    return history.versions(path)[-1].date


def bundled_data_load(*, progress=None) -> dict[str, ImportSummary]:
    """Everything the project ships: the Liger data and its history (the controlled runs are
    loaded by load_bundled_data after it)."""
    # The history first: the bundled file is its last version (the same bytes), dated as that commit.
    return {
        "liger-kernel-history": liger_history_import(path=BUNDLED_LIGER_HISTORY, progress=progress),
        "liger-kernel": liger_import(
            path=BUNDLED_LIGER_CSV, progress=progress, as_of=history_last_date(BUNDLED_LIGER_HISTORY)
        ),
    }
