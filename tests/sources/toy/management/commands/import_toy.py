from django.core.management.base import BaseCommand

from tests.sources.toy.importer import bundled_load


class Command(BaseCommand):
    help = "Load the toy source (a source that exists only in the tests)."

    def handle(self, *args, **options):
        self.stdout.write(bundled_load())
