from celery import shared_task

from registry import services


@shared_task(name="registry.liger_import", acks_late=True, time_limit=1800)
def liger_import_task(path: str, release: str = "") -> dict:
    """Import a Liger CSV in the background; the same service as `manage.py import_liger`.
    Safe to run twice: a second run of the same file changes nothing."""
    return services.liger_import(path=path, release=release).as_dict()
