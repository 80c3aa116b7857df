"""The admin home's figures: what waits for a moderator, and the GPU work that is stuck."""

from datetime import timedelta

from django import template
from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from attestations.models import Attestation, IssueReport
from registry.reruns.models import JobState, RerunJob
from registry.reruns.operations import unserved

register = template.Library()
LISTED = 20


@register.simple_tag
def moderation_home() -> dict:
    now = timezone.now()
    jobs = RerunJob.objects.order_by("created_at")
    counts = jobs.aggregate(
        queued=Count("pk", filter=Q(state=JobState.QUEUED)),
        running=Count("pk", filter=Q(state=JobState.RUNNING)),
    )
    # Stale: what the reconciler takes from its worker, or a queued job nobody claimed since well
    # before the reconciler's resend (the operations page's rule).
    waiting_too_long = now - timedelta(seconds=settings.JOB_RESEND_AFTER)
    stale = jobs.lost(now) | jobs.filter(state=JobState.QUEUED, created_at__lt=waiting_too_long)
    by_queue = dict(
        jobs.active()
        .order_by()
        .values_list("gpu_slug")
        .annotate(count=Count("pk"))
        .values_list("gpu_slug", "count")
    )
    queues = {f"gpu.{slug}": count for slug, count in by_queue.items()}
    return {
        "attestations": Attestation.objects.pending().count(),
        "reports": IssueReport.objects.open().count(),
        **counts,
        "stale_count": stale.count(),
        "stale": list(stale.select_related("kernel")[:LISTED]),
        "unserved": [(queue, queues[queue]) for queue in unserved(queues)],
    }
