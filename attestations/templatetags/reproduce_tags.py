"""The run page's "Reproduce it yourself": the kit's two commands with this site's own URLs, and
what the contributor's machine needs. No query: the page has the run's specs and its measure job."""

from django import template
from django.conf import settings
from django.urls import reverse

from attestations.reproduction_files import environment_rows
from registry.reruns.kit.build import kit_filename
from registry.reruns.models import RerunJob
from registry.reruns.reproduce import harness_refusal, reproduction_needs
from registry.reruns.services.worker import job_spec

register = template.Library()


@register.inclusion_tag("attestations/reproduce.html", takes_context=True)
def run_reproduce(context, run, controlled=None):
    request = context.get("request")

    def absolute(path: str) -> str:
        return request.build_absolute_uri(path) if request else settings.SITE_URL.rstrip("/") + path

    measurement = getattr(controlled, "measurement", None)
    return {
        "run": run,
        "refusal": harness_refusal(job_spec(RerunJob.rerun_of(run))),
        "needs": reproduction_needs(run, measure_job=measurement.job if measurement else None),
        "kit_url": absolute(reverse("kit-file", args=[kit_filename()])),
        "run_url": absolute(run.get_absolute_url()),
    }


@register.filter
def differs_from(ours: str, theirs: str) -> bool:
    """Two environment values differ when they name different things: "cpu" and "CPU" do not,
    and a value one side did not record is unknown, not different."""
    if "not recorded" in (ours, theirs):
        return False
    return " ".join(str(ours).split()).casefold() != " ".join(str(theirs).split()).casefold()


@register.simple_tag
def environment_side_by_side(attestation):
    """(what, the run's, the contributor's) rows of a data-bearing reproduction."""
    return environment_rows(attestation.run, attestation.environment)
