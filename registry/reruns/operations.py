"""/admin/operations/: the last upstream sync and imports, jobs stuck or failed in the last day,
and GPU queues that have work but no live worker (docs/deploy.md). Here, not in the registry's
admin, because it reads the jobs: the reruns app may read the registry, not the other way."""

from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.core.cache import cache
from django.template.response import TemplateResponse
from django.utils import timezone

from registry.models import SourceImport, SourceSync
from registry.reruns.models import JobState, RerunJob


def operations_view(request):
    """/admin/operations/: the last sync, jobs stuck or failed in the last day, and GPU queues
    that have work but no live worker."""
    context = {**admin.site.each_context(request), "title": "Operations", **operations_summary()}
    return TemplateResponse(request, "admin/operations.html", context)


def operations_summary(*, now=None) -> dict:
    now = now or timezone.now()
    return {
        "last_sync": SourceSync.objects.first(),
        "last_imports": SourceImport.objects.select_related("source")[:10],
        "stuck_syncs": syncs_stuck(),
        **_jobs_needing_attention(now),
    }


def syncs_stuck(*, older_than: timedelta = timedelta(hours=2)) -> list[SourceSync]:
    """Any source's sync attempts still 'running' long after any import could take: the process was killed."""
    return list(
        SourceSync.objects.filter(
            status=SourceSync.Status.RUNNING, started_at__lt=timezone.now() - older_than
        )
    )


def _jobs_needing_attention(now) -> dict:
    day_ago = now - timedelta(days=1)
    waiting_too_long = now - timedelta(seconds=settings.JOB_RESEND_AFTER)
    jobs = RerunJob.objects.select_related("kernel").order_by("-created_at")
    active_queues = sorted({f"gpu.{slug}" for slug in jobs.active().values_list("gpu_slug", flat=True)})
    failed = jobs.filter(state__in=[JobState.FAILED, JobState.DIVERGED], finished_at__gte=day_ago)
    # Stuck: what the reconciler takes from its worker (RerunJob.objects.lost), or a queued job
    # nobody has claimed since well before the reconciler's resend.
    stuck = jobs.lost(now) | jobs.filter(state=JobState.QUEUED, created_at__lt=waiting_too_long)
    live, inspect_error = live_worker_queues()
    return {
        "failed_jobs": failed[:50],
        "stuck_jobs": stuck[:50],
        "queues_without_worker": [q for q in active_queues if q not in live],
        "live_queues": sorted(live),
        "inspect_error": inspect_error,
    }


LIVE_QUEUES_KEY = "admin:live-worker-queues"
LIVE_QUEUES_SECONDS = 30


def served_queues() -> tuple[set[str], str]:
    """live_worker_queues, asked at most every LIVE_QUEUES_SECONDS: the admin's home and the
    rerun page show it, and asking the workers takes up to OPERATIONS_INSPECT_TIMEOUT."""
    cached = cache.get(LIVE_QUEUES_KEY)
    if cached is None:
        queues, error = live_worker_queues()
        cached = {"queues": sorted(queues), "error": error}
        cache.set(LIVE_QUEUES_KEY, cached, LIVE_QUEUES_SECONDS)
    return set(cached["queues"]), cached["error"]


def unserved(queues) -> list[str]:
    """The queues among `queues` that no live worker consumes (all of them when the workers
    cannot be asked: then nothing is known to serve them)."""
    live, _ = served_queues()
    return sorted(set(queues) - live)


def live_worker_queues() -> tuple[set[str], str]:
    """The queues some live Celery worker consumes, by asking the workers over the broker.
    Returns (queues, "") or (set(), why the workers could not be asked)."""
    from kernelindex.celery import app

    try:
        # A connection of its own, not one of the pool's: a request that waits for the workers'
        # replies while holding a pooled connection starves the requests that publish jobs
        # (twenty concurrent rerun requests deadlocked on the pool, tests/faults/test_races.py).
        with app.connection_for_write() as connection:
            inspect = app.control.inspect(timeout=settings.OPERATIONS_INSPECT_TIMEOUT, connection=connection)
            answers = inspect.active_queues() or {}
    except Exception as exc:  # a broker that is down, or one without broadcast (filesystem)
        return set(), f"{type(exc).__name__}: {exc}"
    return {queue["name"] for queues in answers.values() for queue in queues}, ""
