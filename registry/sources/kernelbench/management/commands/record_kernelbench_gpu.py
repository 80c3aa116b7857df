from django.core.management.base import BaseCommand, CommandError

from registry.services.imports import ImportRejected
from registry.sources.kernelbench.measurements import gpu_sweep_record


class Command(BaseCommand):
    help = (
        "Record what `python -m registry.sources.kernelbench.gpu_sweep` measured on a GPU host (its "
        "JSON-lines output): new measurements as `measured` controlled runs, measurements of a problem "
        "already measured on that GPU model as reruns of its run, judged. Recording a file twice changes "
        "nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="gpu_sweep output files, recorded in the order given")

    def handle(self, *args, files, **options):
        for name in files:
            try:
                outcome = gpu_sweep_record(path=name)
            except ImportRejected as exc:
                raise CommandError(str(exc)) from None
            counts = ", ".join(f"{count} {what}" for what, count in sorted(outcome.items())) or "nothing"
            self.stdout.write(self.style.SUCCESS(f"{name}: {counts}"))
