"""How many jobs an hour the fleet measures (`manage.py controlled_sweep --throughput N`): the same
job list swept with one worker, then with every GPU's."""

from pathlib import Path

from django.db.models import Max, Min
from django.utils import timezone

from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.sweep.loop import sweep


def throughput(*, gpu_slug: str, gpus: int, count: int, out: Path, deadline_s: float, log=print) -> dict:
    """Jobs per hour on the same job list (the first `count` targets), with one worker and with
    `gpus` workers: from the first job's start to the last one's finish, so that starting the
    workers (imports, the first CUDA context) is not counted. Nothing is exported."""
    figures = {}
    for workers in (1, gpus):
        began = timezone.now()
        outcome = sweep(
            gpu_slug=gpu_slug,
            gpus=workers,
            out=out,
            deadline_s=deadline_s / 2,
            limit=count,
            reruns=False,
            export=False,
            resume=False,
            log=log,
        )
        jobs = RerunJob.objects.filter(created_at__gte=began, kind=JobKind.MEASURE, state=JobState.SUCCEEDED)
        first, last = _span(jobs)
        hours = (last - first).total_seconds() / 3600 if first and last else 0
        figures[workers] = {
            "jobs": jobs.count(),
            "seconds": hours * 3600,
            "jobs_per_hour": jobs.count() / hours if hours else 0,
            "left": outcome["left"],
        }
        log(f"{workers} worker(s): {figures[workers]}")
    if figures.get(1, {}).get("jobs_per_hour") and gpus > 1:
        figures["speedup"] = figures[gpus]["jobs_per_hour"] / figures[1]["jobs_per_hour"]
    return figures


def _span(jobs):
    span = jobs.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return span["first"], span["last"]
