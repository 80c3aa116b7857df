from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from attestations import services


class Command(BaseCommand):
    help = "Make a user a moderator: add them to the `moderators` group and let them into the admin."

    def add_arguments(self, parser):
        parser.add_argument("user", help="username or email address")

    def handle(self, *args, user, **options):
        users = get_user_model().objects.filter(Q(username=user) | Q(email__iexact=user))
        if users.count() != 1:
            raise CommandError(f"No single user with the username or email {user!r}.")
        target = users.get()
        try:
            services.moderator_add(user=target)
        except Group.DoesNotExist:
            raise CommandError("The moderators group is missing; run `manage.py migrate`.") from None
        self.stdout.write(f"{target.get_username()} is a moderator.")
