"""`reproduced` on a GPU needs two recorded cards that differ (models.raises_level). Eight of the
32 older H200 GeGLU runs, measured on 2026-11-29 before the measuring card was recorded, were
`reproduced` by reruns that could not show another card agreed: they go back to `measured`, each
with an audit entry written as registry.reruns.services.record.run_level_settle writes one (the
service itself reads today's models, which a migration must not). A fresh load gives the same
levels (registry/reruns/controlled.py judges the shipped jobs by the same rule)."""

from django.db import migrations

ACTION = "evidence_level_settled"  # record.LEVEL_AUDIT_ACTION
REASON = (
    "The card that measured this run is not recorded, so no rerun shows two cards agreed: a run "
    "is reproduced on a GPU only when both cards are recorded and differ."
)


def raises_level(verdict, sampling, on_gpu) -> bool:
    """models.raises_level as of this migration."""
    sampling = sampling if isinstance(sampling, dict) else {}
    same_gpu = sampling.get("same_gpu")
    if verdict != "agrees":
        return False
    if same_gpu is not None:
        return same_gpu is False
    return not (on_gpu and sampling.get("basis") == "samples")


def settle(apps, schema_editor):
    Run = apps.get_model("registry", "BenchmarkRun")
    Job = apps.get_model("reruns", "RerunJob")
    AuditEntry = apps.get_model("attestations", "AuditEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    reproduced = Run.objects.filter(evidence_level="reproduced", source__slug="kernelindex-controlled")
    raised = set()
    for run_id, verdict, sampling, gpu_slug in Job.objects.filter(
        run__in=reproduced, kind="rerun", verdict="agrees"
    ).values_list("run_id", "verdict", "sampling", "gpu_slug"):
        if raises_level(verdict, sampling, gpu_slug != "cpu"):
            raised.add(run_id)
    lowered = list(reproduced.exclude(pk__in=raised).values_list("pk", "external_id"))
    if not lowered:
        return
    Run.objects.filter(pk__in=[pk for pk, _ in lowered]).update(evidence_level="measured")
    content_type, _ = ContentType.objects.get_or_create(app_label="registry", model="benchmarkrun")
    AuditEntry.objects.bulk_create(
        AuditEntry(
            actor=None,
            content_type=content_type,
            object_id=pk,
            object_repr=external_id[:200],
            action=ACTION,
            from_state="reproduced",
            to_state="measured",
            reason=REASON,
        )
        for pk, external_id in lowered
    )


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0015_one_current_run_per_target"),
        ("attestations", "0004_reproduction_files"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(settle, migrations.RunPython.noop)]
