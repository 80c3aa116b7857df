"""Print each source's runs: total, current, superseded and withdrawn (the README quotes it)."""

from django.core.management.base import BaseCommand

from registry.selectors import source_counts


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options):
        self.stdout.write("| source | total | current | superseded | withdrawn |")
        self.stdout.write("| --- | --- | --- | --- | --- |")
        for row in source_counts():
            figures = " | ".join(f"{row[k]:,}" for k in ("total", "current", "superseded", "withdrawn"))
            self.stdout.write(f"| {row['slug']} | {figures} |")
