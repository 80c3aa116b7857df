"""Re-derive every run's digest, its manifest's agreement with its fields, every group's ranks, and
check one current run per implementation in each group; print each mismatch and exit with status 1
if there is any."""

import time

from django.core.management.base import BaseCommand, CommandError

from registry.integrity import registry_verify
from registry.models import BenchmarkRun


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options):
        started = time.monotonic()
        found = 0
        for mismatch in registry_verify():
            found += 1
            self.stdout.write(str(mismatch))
        runs = BenchmarkRun.objects.count()
        elapsed = time.monotonic() - started
        if found:
            raise CommandError(f"{found} mismatches in {runs} runs ({elapsed:.1f} s).")
        self.stdout.write(
            f"{runs} runs verified: digests, manifests, ranks and one current run per target agree ({elapsed:.1f} s)."
        )
