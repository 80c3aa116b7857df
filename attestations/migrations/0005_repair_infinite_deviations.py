"""Reproductions filed before every figure in a result file was bounded (issue 36) could store an
infinite deviation (an upstream median of 1e308 ms), which no JSON can carry: their pages and API
answers failed. Such a reproduction keeps its samples and figures; its verdict, which rested on the
absurd figure, is taken off and its note says why."""

import math

from django.db import migrations

DEVIATION_FIELDS = ("deviation", "deviation_low", "deviation_high")
FIGURE_FIELDS = ("median", "p20", "p80", "ci_low", "ci_high")
NOTE = (
    "Not judged: the file's figures gave a deviation no number holds (an absurd upstream figure); "
    "the verdict was taken off when every figure in a result file came to be bounded."
)


def infinite_deviations_repair(apps, schema_editor):
    Attestation = apps.get_model("attestations", "Attestation")
    repaired = []
    for attestation in Attestation.objects.only("pk", *DEVIATION_FIELDS, *FIGURE_FIELDS, "verdict"):
        figures = [getattr(attestation, name) for name in (*DEVIATION_FIELDS, *FIGURE_FIELDS)]
        if all(value is None or math.isfinite(value) for value in figures):
            continue
        for name in DEVIATION_FIELDS:
            setattr(attestation, name, None)
        for name in FIGURE_FIELDS:
            value = getattr(attestation, name)
            if value is not None and not math.isfinite(value):
                setattr(attestation, name, None)
        attestation.verdict, attestation.verdict_note = "", NOTE
        repaired.append(attestation)
    Attestation.objects.bulk_update(repaired, [*DEVIATION_FIELDS, *FIGURE_FIELDS, "verdict", "verdict_note"])


class Migration(migrations.Migration):
    dependencies = [("attestations", "0004_reproduction_files")]

    operations = [migrations.RunPython(infinite_deviations_repair, migrations.RunPython.noop)]
