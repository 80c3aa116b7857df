from django.core.management.base import BaseCommand, CommandError

from registry.models import Kernel, Metric, TimedPass
from registry.reruns.services import JobRefused, measure_request


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class Command(BaseCommand):
    help = (
        "Queue measure jobs: one per workload of KERNEL that has current runs of the given "
        "implementations, passes and metrics, on GPU model --gpu. The admin has the same form."
    )

    def add_arguments(self, parser):
        parser.add_argument("kernel")
        parser.add_argument("--providers", required=True, help="e.g. huggingface,liger")
        parser.add_argument("--passes", default="forward,backward,full")
        parser.add_argument("--metrics", default="latency")
        parser.add_argument("--gpu", required=True, help="GPU model slug, e.g. nvidia-h200 or cpu")
        parser.add_argument("--workload", action="append", default=[], help="Workload slug; repeatable.")
        parser.add_argument("--reason", default="")

    def handle(self, *args, **options):
        try:
            kernel = Kernel.objects.get(slug=options["kernel"])
        except Kernel.DoesNotExist:
            raise CommandError(f"No kernel {options['kernel']!r}.") from None
        passes, metrics = _list(options["passes"]), _list(options["metrics"])
        bad = [p for p in passes if p not in TimedPass.values] + [
            m for m in metrics if m not in Metric.values
        ]
        if bad:
            raise CommandError(f"Unknown pass or metric: {', '.join(bad)}")
        workloads = kernel.workloads.filter(slug__in=options["workload"]) if options["workload"] else None
        try:
            outcome = measure_request(
                kernel=kernel,
                providers=_list(options["providers"]),
                operation_modes=passes,
                metrics=metrics,
                gpu_slug=options["gpu"],
                workloads=workloads,
                reason=options["reason"],
            )
        except JobRefused as refusal:
            raise CommandError(str(refusal)) from None
        for job in outcome.created:
            self.stdout.write(
                f"job {job.pk}: {job.provider} {job.operation_mode} {job.metric} {job.workload.slug}"
            )
        for skipped in outcome.skipped:
            self.stdout.write(f"skipped {skipped}")
        self.stdout.write(f"{len(outcome.created)} measure job(s) queued on gpu.{options['gpu']}")
