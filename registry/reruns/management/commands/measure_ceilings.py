import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from registry.reruns.ceilings import SIZES, ceilings_run, summarize
from registry.reruns.harness import gpu_slug
from registry.reruns.services.measured_ceilings import BUNDLED_CEILINGS_DIR
from registry.reruns.torch_check import torch_missing


class Command(BaseCommand):
    help = (
        "Measure this host's ceilings (a device-to-device copy and a bf16 GEMM, CUDA events, several "
        "samples, median and 95% interval) and write <out>/<gpu>.json, which load_bundled_data "
        "loads. --gpu names the GPU model the host must have (its slug, e.g. nvidia-h200), or cpu "
        "for a small CPU measurement. Writes no database row."
    )

    def add_arguments(self, parser):
        parser.add_argument("--gpu", required=True, help="the GPU model's slug (nvidia-h200), or cpu")
        parser.add_argument(
            "--out", type=Path, default=BUNDLED_CEILINGS_DIR, help="folder to write <gpu>.json in"
        )
        parser.add_argument("--timeout", type=float, default=600, help="seconds the measurement may take")
        for name in ("copy_mib", "gemm_n", "samples", "warmup"):
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, help=f"default: {SIZES}")

    def handle(self, *args, gpu, out, timeout, **options):
        if message := torch_missing("measure_ceilings"):
            raise CommandError(message)
        device = "cpu" if gpu == "cpu" else "cuda"
        sizes = {k: options[k] for k in ("copy_mib", "gemm_n", "samples", "warmup") if options[k] is not None}
        try:
            raw = ceilings_run(device=device, timeout_s=timeout, **sizes)
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        found = gpu_slug(raw["environment"]["gpu_name"])
        if found != gpu:
            raise CommandError(f"This host's GPU is {found}, not {gpu}; nothing written.")
        document = summarize(raw, gpu_slug=found)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{found}.json"
        path.write_text(json.dumps(document, indent=1) + "\n")
        bandwidth, gemm = document["memory_bandwidth"], document["bf16_dense"]
        self.stdout.write(
            self.style.SUCCESS(
                f"{found}: copy {bandwidth['median']:.4g} GB/s (95% {_interval(bandwidth)}), "
                f"bf16 GEMM {gemm['median']:.4g} TFLOP/s (95% {_interval(gemm)}); wrote {path}"
            )
        )


def _interval(figure: dict) -> str:
    low_high = figure["ci95"]
    return f"{low_high[0]:.4g}–{low_high[1]:.4g}" if low_high else "no interval"
