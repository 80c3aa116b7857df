import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from registry.models import BenchmarkRun
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR
from registry.reruns.harness import KERNELS, local_gpu_slug
from registry.reruns.harness.upstream import HarnessMissing
from registry.reruns.sweep.loop import sweep
from registry.reruns.sweep.status import progress
from registry.reruns.sweep.throughput import throughput
from registry.reruns.sweep.timeouts import TimeoutsFileError
from registry.reruns.sweep.workers import JOB_TIMEOUT_S
from registry.reruns.torch_check import torch_missing


class Command(BaseCommand):
    help = (
        "Measure every mappable workload of the source data on this host's GPUs through the real "
        "pipeline (one Celery worker per GPU), rerun each result on another card, and export what "
        "finished into --out. Resumable: runs already in --out are not measured again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, default=BUNDLED_CONTROLLED_DIR)
        parser.add_argument(
            "--gpus", type=int, default=1, help="Workers, one per GPU (CUDA_VISIBLE_DEVICES)."
        )
        parser.add_argument(
            "--deadline", type=float, default=540, help="Seconds before it stops and exports."
        )
        parser.add_argument(
            "--job-timeout",
            type=float,
            default=JOB_TIMEOUT_S,
            help="Seconds one job may run on its card before it is killed and reported "
            f"(default {JOB_TIMEOUT_S}: fused_moe's compiles on a cold cache took up to 235 s).",
        )
        parser.add_argument("--kernel", action="append", default=[], help="Only this kernel; repeatable.")
        parser.add_argument(
            "--skip-kernel",
            action="append",
            default=[],
            help="Leave this kernel out; repeatable (one whose cold compile a short sweep should not "
            "pay, say: fused_moe's autotune warm-up costs a fresh host about 220 s).",
        )
        parser.add_argument("--limit", type=int, default=None, help="Only the first N targets.")
        parser.add_argument("--gpu", default="", help="GPU model slug (default: this host's).")
        parser.add_argument(
            "--same-card-reruns",
            action="store_true",
            help="On a host with one card, rerun what it measures there too (a repeatability check "
            "that cannot make a run reproduced); by default those runs wait for another card.",
        )
        parser.add_argument(
            "--remeasure",
            action="store_true",
            help="Measure every target of the chosen kernels again, measured or not (a fresh job "
            "under today's protocol, in blocks, whose run supersedes the earlier one of its target); "
            "recorded timeouts are tried again and only the new runs are rerun.",
        )
        parser.add_argument(
            "--status",
            action="store_true",
            help="Instead: print where the sweep stands (targets measured, reruns owed, jobs "
            "left) from this registry, without a GPU; needs --gpu off a GPU host.",
        )
        parser.add_argument(
            "--throughput",
            type=int,
            default=0,
            metavar="N",
            help="Instead: measure the same N targets with one worker, then with --gpus workers, "
            "and print jobs per hour for each (nothing is exported).",
        )

    def handle(self, *args, **options):
        try:
            self._handle(options)
        except TimeoutsFileError as exc:
            raise CommandError(str(exc)) from None
        except HarnessMissing as exc:
            raise CommandError(f"{exc}; no job was sent.") from None

    def _handle(self, options):
        options["kernel"] = self._kernels(options["kernel"], options["skip_kernel"])
        if options["status"]:
            self._status(options)
            return
        if message := torch_missing("controlled_sweep"):
            raise CommandError(f"{message} No job was sent.")
        gpu = options["gpu"] or local_gpu_slug()
        if options["gpus"] < 1:
            raise CommandError("--gpus must be at least 1.")
        if options["job_timeout"] <= 0:
            raise CommandError("--job-timeout must be a number of seconds above 0.")
        options["out"].mkdir(parents=True, exist_ok=True)
        log = lambda message: self.stdout.write(str(message))  # noqa: E731
        if options["throughput"]:
            figures = throughput(
                gpu_slug=gpu,
                gpus=options["gpus"],
                count=options["throughput"],
                out=options["out"],
                deadline_s=options["deadline"],
                log=log,
            )
        else:
            figures = sweep(
                gpu_slug=gpu,
                gpus=options["gpus"],
                out=options["out"],
                deadline_s=options["deadline"],
                kernels=options["kernel"] or None,
                limit=options["limit"],
                same_card=options["same_card_reruns"],
                resume=not options["remeasure"],
                job_timeout_s=options["job_timeout"],
                log=log,
            )
        self.stdout.write(json.dumps(figures, indent=1, default=str))

    def _status(self, options) -> None:
        gpu = options["gpu"]
        if not gpu:
            raise CommandError("--status needs --gpu: the GPU model whose sweep to report, e.g. nvidia-h200.")
        if not BenchmarkRun.objects.exists():
            raise CommandError("The registry is empty: run `python manage.py load_bundled_data` first.")
        kernels = options["kernel"] or None
        figures = progress(
            gpu_slug=gpu, kernels=kernels, out=options["out"], job_timeout_s=options["job_timeout"]
        )
        self.stdout.write(json.dumps(figures, indent=1))

    @staticmethod
    def _kernels(named: list[str], skipped: list[str]) -> list[str]:
        """The kernels to sweep: those named (all mapped ones when none is), less those skipped;
        an empty list means all."""
        for flag, names in (("--kernel", named), ("--skip-kernel", skipped)):
            unknown = sorted(set(names) - set(KERNELS))
            if unknown:
                raise CommandError(f"{flag}: no mapped kernel {', '.join(unknown)}.")
        if not skipped:
            return named
        kept = [kernel for kernel in named or KERNELS if kernel not in skipped]
        if not kept:
            raise CommandError("--skip-kernel leaves no kernel to sweep.")
        return kept
