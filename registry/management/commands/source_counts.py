"""Print each source's runs: total, current, superseded and withdrawn; with --controlled,
KernelIndex's own current runs by the source they measure, GPU model and implementation, and how
many are `reproduced` (the README quotes both)."""

from django.core.management.base import BaseCommand

from registry.selectors import controlled_counts, source_counts


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--controlled",
            action="store_true",
            help="Instead: KernelIndex's own current runs by measured source, GPU and implementation.",
        )

    def handle(self, *args, **options):
        if options["controlled"]:
            self._controlled()
            return
        self.stdout.write("| source | total | current | superseded | withdrawn |")
        self.stdout.write("| --- | --- | --- | --- | --- |")
        for row in source_counts():
            figures = " | ".join(f"{row[k]:,}" for k in ("total", "current", "superseded", "withdrawn"))
            self.stdout.write(f"| {row['slug']} | {figures} |")

    def _controlled(self):
        self.stdout.write("| measures | GPU | implementation | current | reproduced |")
        self.stdout.write("| --- | --- | --- | --- | --- |")
        for row in controlled_counts():
            self.stdout.write(
                f"| {row['measures'] or '-'} | {row['gpu_product'] or '-'} | "
                f"{row['implementation__provider']} | {row['current']:,} | {row['reproduced']:,} |"
            )
