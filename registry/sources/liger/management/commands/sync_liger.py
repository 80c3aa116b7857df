from django.core.management.base import BaseCommand, CommandError

from registry.models import SourceSync
from registry.sources.liger.sync import liger_sync
from registry.sources.liger.tasks import sync_liger_task


class Command(BaseCommand):
    help = (
        "Import the benchmark data files of the newest (or the named) liger-kernel release from "
        "PyPI. All files of the release or none; a failure is recorded and mailed to moderators."
    )

    def add_arguments(self, parser):
        parser.add_argument("release", nargs="?", default="", help="e.g. 0.8.5; default: the newest.")
        parser.add_argument("--force", action="store_true", help="Import even if already imported.")
        parser.add_argument("--queue", action="store_true", help="Send it to the Celery worker instead.")

    def handle(self, *args, release, force, queue, **options):
        if queue:
            sync_liger_task.delay(release)
            self.stdout.write(f"Queued a sync of liger-kernel {release or '(newest)'}.")
            return
        sync = liger_sync(version=release, force=force)
        if sync.status == SourceSync.Status.FAILED:
            raise CommandError(f"Sync #{sync.pk} failed, nothing was imported: {sync.error}")
        if sync.status == SourceSync.Status.UP_TO_DATE:
            self.stdout.write(f"liger-kernel {sync.release} is already imported (sync #{sync.pk}).")
            return
        for result in sync.files:
            self.stdout.write(
                f"{result['filename']} ({result['file_digest'][:19]}…): {result['rows']} rows, "
                f"{result['created']} created, {result['unchanged']} unchanged, "
                f"{result['superseded']} superseded, {result['withdrawn']} withdrawn"
            )
        self.stdout.write(self.style.SUCCESS(f"Imported liger-kernel {sync.release} (sync #{sync.pk})."))
