import sys
from datetime import UTC, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from registry.services import ImportRejected
from registry.sources.liger.services import liger_import


class Command(BaseCommand):
    help = "Import a Liger-Kernel benchmark CSV (all_benchmark_data.csv format). All or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", help="Path to the CSV file.")
        parser.add_argument("--release", default="", help="The liger-kernel release the file came from.")
        parser.add_argument(
            "--published",
            default="",
            help="When upstream published the file (YYYY-MM-DD, or ISO 8601 with a time zone); "
            "default: when its newest row was measured. Imports are ordered by this date.",
        )

    def handle(self, *args, path, release, published, **options):
        as_of = _published(published)
        bar = tqdm(desc="Importing", unit="row", disable=not sys.stderr.isatty(), file=sys.stderr)
        try:
            summary = liger_import(path=path, release=release, progress=bar.update, as_of=as_of)
        except ImportRejected as exc:
            # Name the file as it was typed (the service names it by its file name alone).
            detail = str(exc).removeprefix(f"{Path(path).name}: ").removeprefix(f"{path}: ")
            raise CommandError(f"Import refused, nothing was written. {path}: {detail}") from None
        finally:
            bar.close()
        self.stdout.write(self.style.SUCCESS(f"Imported {path}: {summary}"))


def _published(value: str) -> datetime | None:
    if not value:
        return None
    try:
        date = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--published {value!r}: give a date as YYYY-MM-DD") from None
    return date if date.tzinfo else date.replace(tzinfo=UTC)
