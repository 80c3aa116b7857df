import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from registry.services import ImportRejected
from registry.sources.kernelbench.services import kernelbench_import


class Command(BaseCommand):
    help = (
        "Import every version of KernelBench's results/timing, oldest first. PATH is a git clone of "
        "KernelBench, a folder laid out like its shipped data (timing/INDEX.tsv, problems/INDEX.tsv), "
        "or a .tar.xz of one (registry/sources/kernelbench/data/kernelbench.tar.xz). Every version is "
        "checked before anything is written; each is then imported whole or not at all, and versions "
        "already imported are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")

    def handle(self, *args, path, **options):
        bar = tqdm(desc="Importing", unit="row", disable=not sys.stderr.isatty(), file=sys.stderr)
        try:
            summary = kernelbench_import(path=path, progress=bar.update)
        except ImportRejected as exc:
            raise CommandError(f"Import refused, nothing was written. {exc}") from None
        finally:
            bar.close()
        self.stdout.write(self.style.SUCCESS(str(summary)))
