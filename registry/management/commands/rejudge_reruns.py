from collections import Counter

from django.core.management.base import BaseCommand

from registry.models import JobKind, JobState, RerunJob
from registry.reruns.services import rerun_rejudge


class Command(BaseCommand):
    help = (
        "Judge every finished rerun with a verdict again, from the samples it keeps, under today's "
        "statistics and tolerance (rerun_rejudge, one transaction per job); the judgement each had "
        "is kept on the job, and run levels follow the evidence rule. Safe to repeat."
    )

    def add_arguments(self, parser):
        parser.add_argument("--gpu", default="", help="Only reruns on this GPU model slug.")
        parser.add_argument("--kernel", default="", help="Only reruns of this kernel.")

    def handle(self, *args, gpu, kernel, **options):
        jobs = RerunJob.objects.filter(
            kind=JobKind.RERUN, state__in=(JobState.SUCCEEDED, JobState.DIVERGED)
        ).exclude(verdict="")
        if gpu:
            jobs = jobs.filter(gpu_slug=gpu)
        if kernel:
            jobs = jobs.filter(kernel__slug=kernel)
        changes = Counter()
        for job_id in jobs.order_by("pk").values_list("pk", flat=True).iterator():
            outcome = rerun_rejudge(job_id=job_id)
            if outcome is not None:
                changes[outcome] += 1
        for (before, now), count in sorted(changes.items()):
            self.stdout.write(f"{before:>12} -> {now:<12} {count}")
        changed = sum(count for (before, now), count in changes.items() if before != now)
        self.stdout.write(
            self.style.SUCCESS(f"{sum(changes.values())} rerun(s) judged again, {changed} changed")
        )
