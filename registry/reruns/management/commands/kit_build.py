from django.core.management.base import BaseCommand, CommandError

from registry.reruns.kit.build import KitBuildError, kit_build


class Command(BaseCommand):
    help = (
        "Build the reproduction kit (kernelindex-kit-<version>.tar.gz) from the current harness files "
        "into VAR_DIR/kit/ (or --dest) and print its path. The site builds it on the first request to "
        "/kit/ too; this is for copying it to a host that cannot reach the site."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dest", help="folder to write the sdist into (default: VAR_DIR/kit/)")

    def handle(self, *args, dest=None, **options):
        try:
            path = kit_build(dest=dest)
        except KitBuildError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(str(path))
