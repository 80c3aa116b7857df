from django.core.management.base import BaseCommand

from registry.models import BenchmarkRun
from registry.speed_of_light import speed_of_light_report


class Command(BaseCommand):
    help = (
        "The speed-of-light figures of the registry's current runs: how many kernels are countable, "
        "which runs are implausible, and per GPU model the median, 5th and 95th percentile of the "
        "latency runs' percentage of the speed of light (datasheet, and measured where known)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="every run, not only the current ones")

    def handle(self, *args, all, **options):
        report = speed_of_light_report(BenchmarkRun.objects.all() if all else None)
        out = self.stdout.write
        out(f"Countable kernels: {len(report['countable'])} of {report['kernels']}")
        for kernel, reason in report["uncounted"].items():
            out(f"  not counted: {kernel}: {reason}")
        for kernel, mode, reason in report["not_counted"]:
            out(f"  {kernel} {mode}: {reason}")
        out(f"Runs with a percentage: {report['runs_with_percent']} of {report['runs']}")
        out(f"Implausible runs: {len(report['implausible'])}")
        for external_id, median, unit, percent in report["implausible"]:
            shown = "no finite percentage" if percent is None else f"{percent:.0f}%"
            of = "of its memory floor" if "-memory/" in external_id else "of the speed of light"
            out(f"  {external_id}: {median:g} {unit} ({shown} {of})")
        out("Percentage of the speed of light, latency runs, per GPU (count: median [p5–p95]):")
        for gpu, figures in report["per_gpu"].items():
            parts = [
                f"{kind} {f['count']}: {f['median']:.1f}% [{f['p5']:.1f}–{f['p95']:.1f}%]"
                for kind in ("datasheet", "measured")
                if (f := figures[kind])
            ]
            out(f"  {gpu} ({figures['runs']} runs): " + ("; ".join(parts) or "no percentage"))
