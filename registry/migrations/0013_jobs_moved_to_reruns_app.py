"""RerunJob and MeasuredCeiling now belong to the `reruns` app (registry/reruns/models.py): they
leave the registry's migration state only; their tables and rows stay where they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0012_rerunjob_timed_out"),
        ("reruns", "0001_move_jobs_from_registry"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="MeasuredCeiling"),
                migrations.DeleteModel(name="RerunJob"),
            ],
        ),
    ]
