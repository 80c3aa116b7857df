"""How to cite a run: permalink, digest and access date, as BibTeX and as CSL-JSON."""

import datetime
import re

from django.conf import settings
from django.urls import reverse

from registry.models import BenchmarkRun

BIBTEX_SPECIALS = re.compile(r"([\\{}%&$#_^~])")
BIBTEX_REPLACEMENTS = {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}"}


def permalink(run: BenchmarkRun) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("registry:run-detail", args=[run.pk])


def digest_permalink(run: BenchmarkRun) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("registry:run-by-digest", args=[run.digest])


def title(run: BenchmarkRun) -> str:
    return (
        f"{run.kernel.name}, {run.get_operation_mode_display().lower()} {run.get_metric_display().lower()}: "
        f"{run.implementation.provider} on {run.environment.product} ({run.workload.summary})"
    )


def citation_key(run: BenchmarkRun) -> str:
    return "kernelindex-" + run.digest.removeprefix("sha256:")[:12]


def _bibtex_escape(text: str) -> str:
    return BIBTEX_SPECIALS.sub(lambda m: BIBTEX_REPLACEMENTS.get(m.group(1), "\\" + m.group(1)), text)


def bibtex(run: BenchmarkRun, *, accessed: datetime.date) -> str:
    fields = [
        ("title", _bibtex_escape(title(run))),
        ("author", "{" + _bibtex_escape(run.source.name) + "}"),
        ("publisher", "KernelIndex"),
        ("year", str(run.observed_at.year)),
        ("month", run.observed_at.strftime("%b").lower()),
        ("howpublished", r"\url{" + permalink(run) + "}"),
        ("url", permalink(run)),
        ("urldate", accessed.isoformat()),
        (
            "note",
            _bibtex_escape(
                f"KernelIndex record {run.external_id}; digest {run.digest}; "
                f"evidence level: {run.evidence_level}; accessed {accessed.isoformat()}"
            ),
        ),
    ]
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@misc{{{citation_key(run)},\n{body}\n}}\n"


def _date_parts(day: datetime.date) -> dict:
    return {"date-parts": [[day.year, day.month, day.day]]}


def csl_json(run: BenchmarkRun, *, accessed: datetime.date) -> list[dict]:
    return [
        {
            "id": citation_key(run),
            "type": "dataset",
            "title": title(run),
            "author": [{"literal": run.source.name}],
            "publisher": "KernelIndex",
            "issued": _date_parts(run.observed_at.date()),
            "accessed": _date_parts(accessed),
            "URL": permalink(run),
            "note": f"Digest {run.digest}. Evidence level: {run.evidence_level}.",
            "number": run.external_id,
            "version": run.digest,
        }
    ]
