"""A result file counts once per run, whoever files it (issue 36): the same file filed again on its
run, before this constraint, is rejected here with a reason naming the first filing, and the
rejection is in the audit log (KernelIndex as its actor); then the constraint holds it."""

from django.conf import settings
from django.db import migrations, models

REASON = "The same result file was filed before on this run as reproduction #{first}; a measurement counts once."


def later_filings_reject(apps, schema_editor):
    Attestation = apps.get_model("attestations", "Attestation")
    AuditEntry = apps.get_model("attestations", "AuditEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    first_of, later = {}, []
    filings = Attestation.objects.filter(origin="file").exclude(state="rejected").order_by("created_at", "pk")
    for attestation in filings.only("pk", "run_id", "content_digest", "state"):
        key = (attestation.run_id, attestation.content_digest)
        if key in first_of:
            later.append((attestation, first_of[key]))
        else:
            first_of[key] = attestation.pk
    if not later:
        return
    content_type, _ = ContentType.objects.get_or_create(app_label="attestations", model="attestation")
    for attestation, first in later:
        reason = REASON.format(first=first)
        Attestation.objects.filter(pk=attestation.pk).update(state="rejected", rejection_reason=reason)
        AuditEntry.objects.create(
            actor=None,
            content_type=content_type,
            object_id=attestation.pk,
            object_repr=f"Reproduction #{attestation.pk} on run {attestation.run_id}",
            action="rejected",
            from_state=attestation.state,
            to_state="rejected",
            reason=reason,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("attestations", "0005_repair_infinite_deviations"),
        ("registry", "0012_rerunjob_timed_out"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(later_filings_reject, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="attestation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("origin", "file"), models.Q(("state", "rejected"), _negated=True)),
                fields=("run", "content_digest"),
                name="one_filing_per_result_file",
            ),
        ),
    ]
