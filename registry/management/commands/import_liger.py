import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from registry.services import ImportRejected, liger_import


class Command(BaseCommand):
    help = "Import a Liger-Kernel benchmark CSV (all_benchmark_data.csv format). All or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", help="Path to the CSV file.")
        parser.add_argument("--release", default="", help="The liger-kernel release the file came from.")

    def handle(self, *args, path, release, **options):
        bar = tqdm(desc="Importing", unit="row", disable=not sys.stderr.isatty(), file=sys.stderr)
        try:
            summary = liger_import(path=path, release=release, progress=bar.update)
        except ImportRejected as exc:
            # Name the file as it was typed (the service names it by its file name alone).
            detail = str(exc).removeprefix(f"{Path(path).name}: ").removeprefix(f"{path}: ")
            raise CommandError(f"Import refused, nothing was written. {path}: {detail}") from None
        finally:
            bar.close()
        self.stdout.write(self.style.SUCCESS(f"Imported {path}: {summary}"))
