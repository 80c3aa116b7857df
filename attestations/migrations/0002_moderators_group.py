"""The `moderators` group, with exactly what moderating needs: see and decide attestations, see and
triage issue reports, read the audit log. Nothing can be added, edited or deleted through it."""

from django.db import migrations

MODERATOR_PERMISSIONS = [
    ("attestations", "attestation", "view_attestation"),
    ("attestations", "attestation", "moderate_attestation"),
    ("attestations", "issuereport", "view_issuereport"),
    ("attestations", "issuereport", "triage_issuereport"),
    ("attestations", "auditentry", "view_auditentry"),
]


def permissions_create(apps, app_label):
    """Permissions are normally created after all migrations ran; a data migration that grants
    them needs them now. (A migration's app config is a stub without a models module, which
    would skip them.)"""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes

    app_config = apps.get_app_config(app_label)
    stub = getattr(app_config, "models_module", None) is None
    if stub:
        app_config.models_module = True
    create_contenttypes(app_config, apps=apps, verbosity=0)
    create_permissions(app_config, apps=apps, verbosity=0)
    if stub:
        app_config.models_module = None


def permissions_get(apps, triples):
    Permission = apps.get_model("auth", "Permission")
    return [
        Permission.objects.get(content_type__app_label=app, content_type__model=model, codename=codename)
        for app, model, codename in triples
    ]


def moderators_create(apps, schema_editor):
    permissions_create(apps, "attestations")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name="moderators")
    group.permissions.set(permissions_get(apps, MODERATOR_PERMISSIONS))


def moderators_remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="moderators").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("attestations", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(moderators_create, moderators_remove)]
