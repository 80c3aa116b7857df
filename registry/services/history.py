"""Importing the history of Liger-Kernel's data file: every value the source ever published."""

from dataclasses import dataclass, field
from pathlib import Path

from registry.importers import history
from registry.importers.liger import MAIN_FILE, SOURCE
from registry.models import SourceImport
from registry.services.imports import (
    BUNDLED_LIGER_CSV,
    ImportSummary,
    UpstreamVersion,
    liger_import,
    liger_version_import,
)

BUNDLED_LIGER_HISTORY = Path(__file__).resolve().parent.parent / "data" / "liger-kernel" / "history"


@dataclass
class HistorySummary:
    versions: int = 0
    imported: int = 0
    already: int = 0
    totals: ImportSummary = field(default_factory=ImportSummary)

    def __str__(self) -> str:
        t = self.totals
        return (
            f"{self.versions} versions ({self.imported} imported, {self.already} already imported): "
            f"{t.created} runs created, {t.superseded} superseded, {t.withdrawn} withdrawn"
            + (f", {t.restored} listed again" if t.restored else "")
        )

    # The names load_bundled_data and the other summaries share.
    @property
    def created(self) -> int:
        return self.totals.created


def liger_history_import(*, path: Path | str, progress=None) -> HistorySummary:
    """Every version of the data file, oldest first, each in its own transaction (all of a
    version or none of it). A version whose commit is already imported is skipped, so a second
    run changes nothing and an interrupted one resumes."""
    versions = history.versions(path)
    done = set(
        SourceImport.objects.filter(
            source__slug=SOURCE["slug"], upstream_commit__in=[v.commit for v in versions]
        ).values_list("upstream_commit", flat=True)
    )
    summary = HistorySummary(versions=len(versions))
    for version in versions:
        if version.commit in done:
            summary.already += 1
            continue
        upstream = UpstreamVersion(
            commit=version.commit,
            date=version.date,
            pull_request=version.pull_request,
            subject=version.subject,
        )
        imported = liger_version_import(
            data=version.data, filename=MAIN_FILE, upstream=upstream, progress=progress
        )
        summary.imported += 1
        for name, value in imported.as_dict().items():
            setattr(summary.totals, name, getattr(summary.totals, name) + value)
    return summary


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
