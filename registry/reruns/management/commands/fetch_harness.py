import os

from django.core.management.base import BaseCommand, CommandError

from registry.reruns.harness.upstream import (
    ARCHIVE_ENV,
    LIGER_KERNEL_VERSION,
    HarnessMissing,
    harness_fetch,
)


class Command(BaseCommand):
    help = (
        "Unpack the pinned liger-kernel source distribution's benchmark scripts, tests and sources "
        "into KERNELINDEX_HARNESS_DIR (default ~/.cache/kernelindex/harness). It is downloaded from "
        "the package index, or, with --archive PATH (or KERNELINDEX_HARNESS_ARCHIVE), read from a "
        "local .tar.gz or a folder holding it, such as the wheelhouse of scripts/wheelhouse.py: "
        "no network, no build step. Either way its sha256 is checked against the pinned one."
    )

    def add_arguments(self, parser):
        parser.add_argument("--liger-version", default=LIGER_KERNEL_VERSION, help="liger-kernel version")
        parser.add_argument("--force", action="store_true", help="unpack again over an existing harness")
        parser.add_argument(
            "--archive",
            default=os.environ.get(ARCHIVE_ENV) or None,
            metavar="PATH",
            help=f"a local liger_kernel-<version>.tar.gz, or a folder holding it (default: ${ARCHIVE_ENV}); "
            "nothing is downloaded",
        )
        parser.add_argument(
            "--sha256",
            default=None,
            help="the sdist's expected sha256, for a version whose digest is not pinned in the code",
        )

    def handle(self, *args, liger_version, force, archive, sha256, **options):
        version = liger_version
        source = f"from {archive}" if archive else "from the package index"
        try:
            root = harness_fetch(version=version, force=force, archive=archive, sha256=sha256)
        except (HarnessMissing, OSError) as exc:
            raise CommandError(f"Could not fetch the harness {source}: {exc}") from None
        except Exception as exc:  # pip's own failure (no network, no such version)
            raise CommandError(f"Could not fetch the harness {source}: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"liger-kernel {version} harness in {root}"))
