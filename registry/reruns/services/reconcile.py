"""Reconciling: what a lost worker or a lost message left behind is put right."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services.request import send_on_commit
from registry.reruns.services.worker import job_gave_up


@transaction.atomic
def jobs_reconcile(*, now=None) -> dict[str, int]:
    """Put running jobs whose worker is lost (`RerunJob.objects.lost`) back to queued, fail those
    out of attempts, and send again queued jobs whose message may have been lost. Safe to run at
    any time and from several places: every change is a conditional update, and a duplicate
    message is harmless (the claim decides)."""
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    for job in RerunJob.objects.lost(now).only("pk", "attempts", "gpu_slug"):
        mine = RerunJob.objects.lost(now).filter(pk=job.pk)
        if job.attempts >= settings.JOB_MAX_ATTEMPTS:
            counts["failed"] += mine.update(**job_gave_up(job, now))
        elif mine.update(
            state=JobState.QUEUED, lease="", heartbeat_at=None, result_sent_at=None, sent_at=now
        ):
            counts["requeued"] += 1
            send_on_commit(job)
    unsent = RerunJob.objects.filter(
        state=JobState.QUEUED, sent_at__lt=now - timedelta(seconds=settings.JOB_RESEND_AFTER)
    )
    for job in unsent.only("pk", "gpu_slug"):
        if RerunJob.objects.filter(pk=job.pk, state=JobState.QUEUED).update(sent_at=now):
            counts["resent"] += 1
            send_on_commit(job)
    if counts["requeued"] or counts["failed"]:
        generation_bump()  # a resend changes nothing a page shows
    return counts
