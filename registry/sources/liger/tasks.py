"""Liger's Celery tasks, found by autodiscovery now that its folder is an installed app. They keep
the names they had in registry/tasks.py (`registry.liger_import`, `registry.sync_liger`): a queued
message and the beat schedule name a task by that."""

from celery import shared_task

from registry.sources.liger.services import liger_import
from registry.sources.liger.sync import liger_sync


@shared_task(name="registry.liger_import", acks_late=True, time_limit=1800)
def liger_import_task(path: str, release: str = "") -> dict:
    """Import a Liger CSV in the background; the same service as `manage.py import_liger`.
    Safe to run twice: a second run of the same file changes nothing."""
    return liger_import(path=path, release=release).as_dict()


@shared_task(name="registry.sync_liger", acks_late=True, time_limit=1800, soft_time_limit=1700)
def sync_liger_task(version: str = "") -> dict:
    """The daily beat job (and `manage.py sync_liger --queue`). Safe to run twice: a release
    already imported from the same archive is skipped."""
    sync = liger_sync(version=version)
    return {"sync": sync.pk, "status": sync.status, "release": sync.release}
