"""The moderators' rights on controlled runs, stated with the `reruns` label: see runs and jobs,
and queue and cancel jobs. A database migrated before the move already holds them (the content
type moved with its permissions); this makes them sure on every database and is what the tests
replay after a flush."""

import importlib

from django.db import migrations

group_0002 = importlib.import_module("attestations.migrations.0002_moderators_group")

RERUN_PERMISSIONS = [
    ("registry", "benchmarkrun", "view_benchmarkrun"),
    ("reruns", "rerunjob", "view_rerunjob"),
    ("reruns", "rerunjob", "request_rerun"),
]


def permissions_add(apps, schema_editor):
    group_0002.permissions_create(apps, "registry")
    group_0002.permissions_create(apps, "reruns")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name="moderators")
    group.permissions.add(*group_0002.permissions_get(apps, RERUN_PERMISSIONS))


class Migration(migrations.Migration):
    dependencies = [
        ("reruns", "0001_move_jobs_from_registry"),
        # The registry's state no longer has the jobs, so its content types are not made again.
        ("registry", "0013_jobs_moved_to_reruns_app"),
        ("attestations", "0003_moderators_request_reruns"),
    ]

    # Backwards leaves the grant: the previous migration's state had it too.
    operations = [migrations.RunPython(permissions_add, migrations.RunPython.noop)]
