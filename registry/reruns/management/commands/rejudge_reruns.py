from django.core.management.base import BaseCommand

from registry.reruns.services.record import reruns_rejudge


class Command(BaseCommand):
    help = (
        "Judge every finished rerun with a verdict again, from the samples it keeps, under today's "
        "rule (the verdict model of registry/stats/ for cuda-v1 latency reruns, the fixed tolerance "
        "for the rest; rerun_rejudge, one transaction per job); the judgement each had is kept on "
        "the job, and run levels follow the evidence rule. No sample changes. Safe to repeat."
    )

    def add_arguments(self, parser):
        parser.add_argument("--gpu", default="", help="Only reruns on this GPU model slug.")
        parser.add_argument("--kernel", default="", help="Only reruns of this kernel.")

    def handle(self, *args, gpu, kernel, **options):
        changes = reruns_rejudge(gpu=gpu, kernel=kernel)
        for (before, now), count in sorted(changes.items()):
            self.stdout.write(f"{before:>12} -> {now:<12} {count}")
        changed = sum(count for (before, now), count in changes.items() if before != now)
        self.stdout.write(
            self.style.SUCCESS(f"{sum(changes.values())} rerun(s) judged again, {changed} changed")
        )
