from django.core.management.base import BaseCommand, CommandError

from registry.models import BenchmarkRun
from registry.reruns.services import JobRefused, rerun_request


class Command(BaseCommand):
    help = "Queue a controlled rerun of each run (by id or external id) on its own GPU model."

    def add_arguments(self, parser):
        parser.add_argument("runs", nargs="+", help="Run ids or external ids")
        parser.add_argument("--reason", default="")

    def handle(self, *args, runs, reason, **options):
        refused = 0
        for ref in runs:
            lookup = {"pk": int(ref)} if ref.isascii() and ref.isdigit() else {"external_id": ref}
            run = (
                BenchmarkRun.objects.select_related("implementation", "environment").filter(**lookup).first()
            )
            if run is None:
                raise CommandError(f"No run {ref!r}.")
            try:
                job = rerun_request(run=run, reason=reason)
            except JobRefused as refusal:
                refused += 1
                self.stderr.write(str(refusal))
                continue
            self.stdout.write(f"job {job.pk}: rerun of run {run.pk} on {job.queue}")
        if refused:
            raise CommandError(f"{refused} rerun(s) refused.")
