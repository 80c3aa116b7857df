from django.core.management.base import BaseCommand, CommandError

from registry.services import ImportRejected
from registry.sources.liger.history import HistoryError
from registry.sources.liger.services import liger_history_import


class Command(BaseCommand):
    help = (
        "Import every version of Liger-Kernel's benchmark/data/all_benchmark_data.csv, oldest first: "
        "PATH is a git clone of Liger-Kernel, or a folder with INDEX.tsv and one CSV per version "
        "(registry/sources/liger/data/history/). Each version is imported whole or not at all; "
        "versions already imported are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")

    def handle(self, *args, path, **options):
        try:
            summary = liger_history_import(path=path)
        except (HistoryError, ImportRejected) as exc:
            raise CommandError(str(exc)) from None  # it says what was imported and whether to run again
        self.stdout.write(self.style.SUCCESS(str(summary)))
