from django.core.management.base import BaseCommand, CommandError

from registry.reruns.harness.cache import LIGER_KERNEL_VERSION, HarnessMissing, harness_fetch


class Command(BaseCommand):
    help = (
        "Download the pinned liger-kernel source distribution from PyPI and unpack its benchmark "
        "scripts, tests and sources into KERNELINDEX_HARNESS_DIR (default ~/.cache/kernelindex/harness)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--liger-version", default=LIGER_KERNEL_VERSION, help="liger-kernel version")
        parser.add_argument("--force", action="store_true", help="download and unpack again")

    def handle(self, *args, liger_version, force, **options):
        version = liger_version
        try:
            root = harness_fetch(version=version, force=force)
        except (HarnessMissing, OSError) as exc:
            raise CommandError(f"Could not fetch the harness: {exc}") from None
        except Exception as exc:  # pip's own failure (no network, no such version)
            raise CommandError(f"Could not fetch the harness: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"liger-kernel {version} harness in {root}"))
