"""Moderators may queue and cancel controlled reruns and measure jobs (issue reports often ask for
one), and so see the runs and jobs those actions work on. They still cannot edit either: runs change
only through imports and the rerun pipeline, jobs only through the services."""

import importlib

from django.db import migrations

group_0002 = importlib.import_module("attestations.migrations.0002_moderators_group")

RERUN_PERMISSIONS = [
    ("registry", "benchmarkrun", "view_benchmarkrun"),
    ("registry", "rerunjob", "view_rerunjob"),
    ("registry", "rerunjob", "request_rerun"),
]


def permissions_add(apps, schema_editor):
    group_0002.permissions_create(apps, "registry")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name="moderators")
    group.permissions.add(*group_0002.permissions_get(apps, RERUN_PERMISSIONS))


def permissions_remove(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.filter(name="moderators").first()
    if group:
        group.permissions.remove(*group_0002.permissions_get(apps, RERUN_PERMISSIONS))


class Migration(migrations.Migration):
    dependencies = [
        ("attestations", "0002_moderators_group"),
        ("registry", "0004_rerunjob_request_rerun_permission"),
    ]

    operations = [migrations.RunPython(permissions_add, permissions_remove)]
