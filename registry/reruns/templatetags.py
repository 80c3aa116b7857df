"""The run page's controlled-run history: the job that measured it and every rerun, newest first."""

from django import template
from django.db.models import Q

from registry.models import RerunJob

register = template.Library()

HISTORY_FIELDS = [
    "pk",
    "kind",
    "state",
    "created_at",
    "finished_at",
    "gpu_slug",
    "worker_gpu",
    "attempts",
    "unit",
    "median",
    "p20",
    "p80",
    "ci_low",
    "ci_high",
    "tolerance",
    "deviation",
    "error",
    "run_id",
    "result_run_id",
]


@register.inclusion_tag("registry/rerun_history.html")
def run_reruns(run):
    """One query, however long the history."""
    jobs = list(
        RerunJob.objects.filter(Q(run=run) | Q(result_run=run))
        .only(*HISTORY_FIELDS)
        .order_by("-created_at", "-pk")
    )
    return {"run": run, "jobs": jobs, "has_active": any(job.is_active for job in jobs)}
