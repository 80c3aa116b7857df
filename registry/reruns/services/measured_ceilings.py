"""A GPU model's measured ceilings as registry rows: from a finished ceilings job (the recorder)
or from the files `manage.py measure_ceilings` writes (registry/data/ceilings/, loaded by
`load_bundled_data`). Either way the runs of that GPU model get their measured speed of light."""

import json
import math
from pathlib import Path

from django.db import transaction
from django.utils.dateparse import parse_datetime

from registry.cache import generation_bump
from registry.models import BenchmarkRun
from registry.reruns.ceilings import FORMAT
from registry.reruns.models import MeasuredCeiling, RerunJob
from registry.speed_of_light import speed_of_light_fill

BUNDLED_CEILINGS_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "ceilings"


class CeilingRejected(ValueError):
    """The document is not a ceilings measurement KernelIndex can record; the message says why."""


@transaction.atomic
def measured_ceiling_create(*, document: dict, job: RerunJob | None = None) -> MeasuredCeiling:
    """Record one measurement (the same GPU model and time again changes nothing), then the speed
    of light of that GPU model's runs against it."""
    fields = ceiling_fields(document)
    ceiling, created = MeasuredCeiling.objects.get_or_create(
        gpu_slug=fields.pop("gpu_slug"),
        measured_at=fields.pop("measured_at"),
        defaults={**fields, "job": job},
    )
    if created:
        speed_of_light_fill(runs=BenchmarkRun.objects.filter(environment__slug=ceiling.gpu_slug))
        generation_bump()
    return ceiling


@transaction.atomic
def measured_ceilings_load(*, path: Path = BUNDLED_CEILINGS_DIR) -> int:
    """Every `<gpu>.json` in `path`; returns how many measurements were new."""
    before = MeasuredCeiling.objects.count()
    for file in sorted(Path(path).glob("*.json")):
        try:
            measured_ceiling_create(document=json.loads(file.read_text()))
        except (ValueError, CeilingRejected) as exc:
            raise CeilingRejected(f"{file}: {exc}") from None
    return MeasuredCeiling.objects.count() - before


def ceiling_fields(document: dict) -> dict:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CeilingRejected(f"not a {FORMAT} document")
    measured_at = parse_datetime(str(document.get("measured_at") or ""))
    if measured_at is None:
        raise CeilingRejected("measured_at is not an ISO 8601 time")
    fields = {"gpu_slug": str(document.get("gpu") or ""), "gpu_name": str(document.get("gpu_name") or "")}
    if not fields["gpu_slug"]:
        raise CeilingRejected("the document names no GPU model")
    for name, key in (("memory_bandwidth", "memory_bandwidth"), ("bf16_tflops", "bf16_dense")):
        figure = document.get(key) or {}
        median, interval = figure.get("median"), figure.get("ci95") or (None, None)
        if not isinstance(median, int | float) or not math.isfinite(median) or median <= 0:
            raise CeilingRejected(f"{key} has no positive median")
        fields.update({name: float(median), f"{name}_low": interval[0], f"{name}_high": interval[1]})
    return {**fields, "measured_at": measured_at, "document": document}
