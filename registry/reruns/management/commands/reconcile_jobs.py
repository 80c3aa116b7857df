from django.core.management.base import BaseCommand

from registry.reruns.services import jobs_reconcile


class Command(BaseCommand):
    help = (
        "Put running jobs whose worker stopped beating back in their queue and send lost queued "
        "jobs again (Celery beat runs the same every minute)."
    )

    def handle(self, *args, **options):
        counts = jobs_reconcile()
        self.stdout.write(
            f"{counts['requeued']} requeued, {counts['resent']} sent again, "
            f"{counts['failed']} failed after too many attempts"
        )
