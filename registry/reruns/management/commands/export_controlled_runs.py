from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from registry.models import BenchmarkRun
from registry.reruns.controlled import (
    controlled_document_write,
    controlled_runs_export,
    controlled_runs_export_dir,
)
from registry.reruns.services import CONTROLLED_SOURCE


class Command(BaseCommand):
    help = (
        "Write KernelIndex's controlled runs (with their measure and rerun jobs) as a JSON file (gzip "
        "when the name ends in .gz) that "
        "load_bundled_data loads from registry/data/controlled-runs/; given a folder (and --gpu), "
        "one <gpu>-<kernel>.json.gz per kernel, as the sweep writes them."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--gpu", default="", help="Only runs on this GPU model slug.")
        parser.add_argument("--kernel", default="", help="Only runs of this kernel.")

    def handle(self, *args, path, gpu, kernel, **options):
        if path.is_dir():
            if not gpu or kernel:
                raise CommandError(
                    "A folder is written per kernel for one GPU model: give --gpu, not --kernel."
                )
            written = controlled_runs_export_dir(out=path, gpu_slug=gpu)
            self.stdout.write(self.style.SUCCESS(f"{len(written)} file(s) written to {path}"))
            return
        runs = BenchmarkRun.objects.filter(source__slug=CONTROLLED_SOURCE["slug"])
        if gpu:
            runs = runs.filter(environment__slug=gpu)
        if kernel:
            runs = runs.filter(kernel__slug=kernel)
        document = controlled_runs_export(runs=runs.order_by("external_id"))
        controlled_document_write(path, document)
        self.stdout.write(self.style.SUCCESS(f"{len(document['runs'])} controlled run(s) written to {path}"))
