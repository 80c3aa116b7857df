"""Keeping the registry current with liger-kernel's releases on PyPI.

A sync finds a release, downloads its source distribution, and imports every benchmark data file
in it through `liger_import`, all files in one transaction: one bad file and nothing of the
release is written. Each attempt is a `SourceSync` row written outside that transaction, so a
failure is remembered, shown in the admin and mailed to the moderators after it is recorded.
"""

import logging
import tempfile
from datetime import datetime
from functools import partial
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from attestations.tasks import sync_failure_notify_task
from registry import digests
from registry.models import SourceSync
from registry.services.imports import ImportRejected
from registry.sources.liger import pypi
from registry.sources.liger.pypi import DataFile, PyPIError
from registry.sources.liger.services import liger_import

logger = logging.getLogger(__name__)


def liger_sync(*, version: str = "", force: bool = False) -> SourceSync:
    """Import the newest (or the named) liger-kernel release. A release already imported from
    the same archive is skipped unless `force`. Never raises for a bad download or a malformed
    file: the attempt is recorded as failed and the moderators are told."""
    sync = SourceSync.objects.create(requested_version=version)
    try:
        release = pypi.release_find(version=version)
        _sync_update(sync, release=release.version, archive_url=release.url, archive_digest=release.sha256)
        if not force and _release_already_imported(sync):
            return _sync_finish(sync, status=SourceSync.Status.UP_TO_DATE)
        with tempfile.TemporaryDirectory(prefix="liger-sync-") as directory:
            archive = pypi.sdist_download(release=release, directory=Path(directory))
            files = pypi.data_files(archive)
            results = release_import(
                release=release.version, files=files, directory=Path(directory), as_of=release.uploaded_at
            )
    except (PyPIError, ImportRejected) as exc:
        return sync_fail(sync=sync, error=str(exc))
    except Exception as exc:
        sync_fail(sync=sync, error=f"unexpected {type(exc).__name__}: {exc}")
        raise
    _sync_update(sync, files=results)
    return _sync_finish(sync, status=SourceSync.Status.IMPORTED)


@transaction.atomic
def release_import(
    *, release: str, files: list[DataFile], directory: Path, as_of: datetime | None = None
) -> list[dict]:
    """Every data file of one release, in one transaction; the main file first, so a variant
    file's runs are ranked against the main file's runs of the same release. `as_of`: when the
    index says the release was published (the import's date against the repository's history)."""
    folder = Path(directory) / "data"
    folder.mkdir(exist_ok=True)
    results = []
    for data_file in files:
        path = folder / data_file.name
        path.write_bytes(data_file.data)
        summary = liger_import(path=path, release=release, as_of=as_of)
        results.append(
            {"filename": data_file.name, "file_digest": digests.file_digest(data_file.data)}
            | summary.as_dict()
        )
        logger.info("imported %s from liger-kernel %s: %s", data_file.name, release, summary)
    return results


def sync_fail(*, sync: SourceSync, error: str) -> SourceSync:
    """Record the failure, then tell the moderators once the record is committed."""
    logger.error("liger-kernel sync %s failed: %s", sync.pk, error)
    _sync_update(sync, error=error[:10000])
    _sync_finish(sync, status=SourceSync.Status.FAILED)
    # robust: a broker that is down must not undo the recorded failure.
    transaction.on_commit(partial(sync_failure_notify_task.delay, sync.pk), robust=True)
    return sync


def sync_last() -> SourceSync | None:
    return SourceSync.objects.first()


def _release_already_imported(sync: SourceSync) -> bool:
    return SourceSync.objects.filter(
        source_slug=sync.source_slug,
        status=SourceSync.Status.IMPORTED,
        release=sync.release,
        archive_digest=sync.archive_digest,
    ).exists()


def _sync_update(sync: SourceSync, **fields) -> None:
    for name, value in fields.items():
        setattr(sync, name, value)
    sync.save(update_fields=list(fields))


def _sync_finish(sync: SourceSync, *, status: str) -> SourceSync:
    _sync_update(sync, status=status, finished_at=timezone.now())
    return sync
