import json

from django.core.management.base import BaseCommand

from registry.models import BenchmarkRun
from registry.reruns.controlled import controlled_runs_export
from registry.reruns.services import CONTROLLED_SOURCE


class Command(BaseCommand):
    help = (
        "Write KernelIndex's controlled runs (with their measure and rerun jobs) as a JSON file that "
        "load_bundled_data loads from registry/data/controlled-runs/."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--gpu", default="", help="Only runs on this GPU model slug.")
        parser.add_argument("--kernel", default="", help="Only runs of this kernel.")

    def handle(self, *args, path, gpu, kernel, **options):
        runs = BenchmarkRun.objects.filter(source__slug=CONTROLLED_SOURCE["slug"])
        if gpu:
            runs = runs.filter(environment__slug=gpu)
        if kernel:
            runs = runs.filter(kernel__slug=kernel)
        document = controlled_runs_export(runs=runs.order_by("external_id"))
        with open(path, "w") as out:
            json.dump(document, out, indent=1, sort_keys=True)
            out.write("\n")
        self.stdout.write(self.style.SUCCESS(f"{len(document['runs'])} controlled run(s) written to {path}"))
