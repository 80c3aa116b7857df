"""The run page's controlled-run history: the job that measured it and every rerun, newest first.

Loaded in templates as `{% load rerun_tags %}`: registry.reruns is a package of the registry app,
not an app of its own, so kernelindex/settings.py names this module in TEMPLATES' "libraries"."""

from django import template
from django.db.models import Q

from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.models import RerunJob
from registry.reruns.services.worker import job_spec

register = template.Library()


@register.inclusion_tag("registry/rerun_history.html")
def run_reruns(run, jobs=None):
    """`jobs`: every job of the run, newest first, where the page has read them (the run page's
    read model, registry/run_page.py); else one query, however long the history."""
    if jobs is None:
        jobs = list(
            RerunJob.objects.filter(Q(run=run) | Q(result_run=run))
            .only(*RerunJob.PUBLIC_FIELDS)
            .order_by("-created_at", "-pk")
        )
    return {
        "run": run,
        "jobs": jobs,
        "has_active": any(job.is_active for job in jobs),
        "refusal": harness_refusal(run),
    }


def harness_refusal(run) -> str:
    """Why KernelIndex's harness cannot run this run's workload, or "" (no query: the run page
    has the run's kernel, workload, implementation and environment already)."""
    try:
        plan_for(job_spec(RerunJob.rerun_of(run)))
    except Refused as exc:
        return str(exc)
    return ""
