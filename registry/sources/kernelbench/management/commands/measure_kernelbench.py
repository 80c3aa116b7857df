from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from registry.models import BenchmarkRun
from registry.sources.kernelbench.harness import CONFIGURATIONS, HarnessError, run_spec
from registry.sources.kernelbench.measurements import kernelbench_measurement_record


class Command(BaseCommand):
    help = (
        "Measure the workload (problem file) of a KernelBench run on this machine's CPU under "
        "kernelindex-cpu-v1, in a child process, and record it as a controlled run with its raw samples."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "run", type=int, help="The id of a KernelBench run: its problem file is measured."
        )
        parser.add_argument("--implementation", choices=sorted(CONFIGURATIONS), default="eager")
        parser.add_argument(
            "--budget", type=float, default=None, help="Seconds of sampling (default: the setting)."
        )

    def handle(self, *args, run, implementation, budget, **options):
        of = BenchmarkRun.objects.select_related("kernel", "workload", "source").filter(pk=run).first()
        if of is None or of.source.slug != "kernelbench":
            raise CommandError(f"No KernelBench run has id {run}.")
        if not of.workload.text:
            raise CommandError(f"Run {run}'s problem file is not in the registry: nothing to run.")
        timing = {**settings.CONTROLLED_TIMING, **({"budget_s": budget} if budget else {})}
        spec = {
            "problem_text": of.workload.text,
            "implementation": implementation,
            "device": "cpu",
            "timing": timing,
        }
        try:
            result = run_spec(spec)
        except HarnessError as exc:
            raise CommandError(str(exc)) from None
        created = kernelbench_measurement_record(
            of=of, implementation=implementation, result=result, timing_settings=timing
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Run {created.pk}: median {created.median:.4g} ms over {len(result['samples'])} samples "
                f"({result['sampling']['stop']}); upstream's way: mean {result['upstream']['mean']} ms"
            )
        )
