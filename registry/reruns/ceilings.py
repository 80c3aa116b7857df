"""Measured ceilings: what one GPU model reaches for memory bandwidth (a device-to-device copy)
and dense bf16 throughput (a large GEMM), the ceilings a run's speed of light is taken against
beside the datasheet's (registry.speed_of_light).

    python -m registry.reruns.ceilings --device cuda      # one JSON document on stdout

The measurement runs in a child process (`ceilings_run`): a GPU worker never initialises CUDA
itself, and a time limit bounds it. `manage.py measure_ceilings` runs the same measurement on a
GPU host and writes the file that `load_bundled_data` loads. This module imports neither torch nor
Django at import time, so the child starts without settings.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

FORMAT = "kernelindex-ceilings/v1"
ROOT = Path(__file__).resolve().parent.parent.parent
# (copy buffer MiB, GEMM n, samples, warm-up calls): a 1 GiB copy and an 8192³ GEMM keep an H200
# busy for about half a millisecond and a millisecond a call, long against the events'
# resolution and far above the 60 MB L2; the CPU sizes let CI run the whole path in seconds.
SIZES = {
    "cuda": {"copy_mib": 1024, "gemm_n": 8192, "samples": 50, "warmup": 5},
    "cpu": {"copy_mib": 16, "gemm_n": 256, "samples": 9, "warmup": 2},
}
COPY_METHOD = (
    "torch.Tensor.copy_ between two device buffers of copy_mib MiB; bytes moved = read + written "
    "(2 × buffer size) per call; one call per sample"
)
GEMM_METHOD = (
    "torch.matmul of two n×n bf16 matrices for n = gemm_n/2, gemm_n and 2·gemm_n; 2·n³ FLOPs per "
    "call; one call per sample; the ceiling is the n whose median rate is highest"
)
# A ceiling is the most the card reaches: cuBLAS reaches more on some shapes than on others (one
# 8192³ GEMM on an H200 gave 732 TFLOP/s while runs' own GEMMs did up to 7% more), so the GEMM is
# timed at three sizes and the best median is the ceiling; every size's samples are kept.
GEMM_SCALES = (0.5, 1, 2)


def measure(*, device: str, copy_mib: int, gemm_n: int, samples: int, warmup: int) -> dict:
    """The raw measurement: seconds per call of the copy and of the GEMM, with what they moved
    and computed, and the environment. CUDA events time a call on a GPU; the wall clock on a CPU."""
    import torch

    on_gpu = device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise RuntimeError("No CUDA device is visible to torch.")
    buffer_bytes = copy_mib * 2**20
    src = torch.empty(buffer_bytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    timer = _cuda_timer(torch) if on_gpu else _wall_timer
    copy_s = timer(lambda: dst.copy_(src), samples, warmup)
    shapes = {}
    for n in sorted({max(int(gemm_n * scale), 16) for scale in GEMM_SCALES}):
        a = torch.randn(n, n, device=device).to(torch.bfloat16)
        b = torch.randn(n, n, device=device).to(torch.bfloat16)
        shapes[n] = timer(lambda a=a, b=b: torch.matmul(a, b), samples, warmup)
        del a, b
    best_n = max(shapes, key=lambda n: 2 * n**3 / statistics.median(shapes[n]))
    return {
        "device": device,
        "environment": _environment(torch, on_gpu),
        "copy": {
            "bytes_per_call": 2 * buffer_bytes,
            "copy_mib": copy_mib,
            "seconds": copy_s,
            "method": COPY_METHOD,
        },
        "gemm": {
            "n": best_n,
            "dtype": "bfloat16",
            "flops_per_call": 2 * best_n**3,
            "seconds": shapes[best_n],
            "shapes": {str(n): seconds for n, seconds in shapes.items()},
            "method": GEMM_METHOD,
        },
    }


def _cuda_timer(torch):
    def timed(fn, samples: int, warmup: int) -> list[float]:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        seconds = []
        for _ in range(samples):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        return seconds

    return timed


def _wall_timer(fn, samples: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return seconds


def _environment(torch, on_gpu: bool) -> dict:
    environment = {"torch": torch.__version__, "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        uuid = str(getattr(props, "uuid", "") or "")
        environment.update(
            gpu_name=torch.cuda.get_device_name(0),
            gpu_uuid=uuid if not uuid or uuid.startswith("GPU-") else f"GPU-{uuid}",
            cuda=torch.version.cuda or "",
            memory_bytes=props.total_memory,
        )
    else:
        environment.update(gpu_name="", gpu_uuid="", cuda="")
    return environment


def summarize(raw: dict, *, gpu_slug: str) -> dict:
    """The shipped document: each ceiling as a median of its per-call rates with the 95%
    distribution-free interval of the median, and every sample."""
    from registry.stats.medians import median_interval

    def figure(per_call: float, seconds: list[float], scale: float, unit: str, method: str) -> dict:
        rates = [per_call / s / scale for s in seconds if s > 0]
        interval = median_interval(rates)
        return {
            "unit": unit,
            "median": statistics.median(rates),
            "ci95": list(interval) if interval else None,
            "samples": rates,
            "method": method,
        }

    copy, gemm = raw["copy"], raw["gemm"]
    return {
        "format": FORMAT,
        "gpu": gpu_slug,
        "gpu_name": raw["environment"]["gpu_name"],
        "measured_at": raw["environment"]["measured_at"],
        "environment": raw["environment"],
        "sizes": {"copy_mib": copy["copy_mib"], "gemm_n": gemm["n"], "samples": len(copy["seconds"])},
        "memory_bandwidth": figure(copy["bytes_per_call"], copy["seconds"], 1e9, "GB/s", copy["method"]),
        "bf16_dense": {
            **figure(gemm["flops_per_call"], gemm["seconds"], 1e12, "TFLOP/s", gemm["method"]),
            "median_by_n": {
                n: 2 * int(n) ** 3 / statistics.median(seconds) / 1e12
                for n, seconds in gemm["shapes"].items()
            },
        },
    }


class CeilingsTimeout(RuntimeError):
    pass


def ceilings_run(*, device: str, timeout_s: float, **sizes) -> dict:
    """The raw measurement, in a child process with a time limit. Raises RuntimeError with the
    child's output when it fails or runs out of time."""
    options = {**SIZES[device], **sizes}
    command = [sys.executable, "-m", "registry.reruns.ceilings", "--device", device]
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CeilingsTimeout(f"The ceilings measurement ran past {timeout_s:.0f} s.") from None
    if done.returncode != 0:
        raise RuntimeError(
            f"The ceilings measurement failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def ceilings_result(spec: dict, *, timeout_s: float) -> dict:
    """A ceilings job's result, in the shape the recorder takes from the harness
    (registry.reruns.harness.run_job_spec): the copy bandwidth as the job's median and samples,
    the whole document under `ceilings`. Never raises for a failed measurement."""
    from registry.reruns.harness import gpu_slug
    from registry.reruns.harness.job_result import JobResult
    from registry.stats.medians import quantiles

    try:
        raw = ceilings_run(device=spec["device"], timeout_s=timeout_s)
    except RuntimeError as exc:
        return JobResult(
            "failed", error=str(exc), log=str(exc), timed_out=isinstance(exc, CeilingsTimeout)
        ).as_wire()
    document = summarize(raw, gpu_slug=gpu_slug(raw["environment"]["gpu_name"]))
    bandwidth = document["memory_bandwidth"]
    median, p20, p80 = quantiles(bandwidth["samples"])
    return JobResult(
        "ok",
        median=median,
        p20=p20,
        p80=p80,
        unit="GB/s",
        samples=bandwidth["samples"],
        gpu_uuid=raw["environment"]["gpu_uuid"],
        environment={**raw["environment"], "gpu_slug": document["gpu"]},
        protocol={"name": FORMAT, "copy": COPY_METHOD, "gemm": GEMM_METHOD},
        ceilings=document,
    ).as_wire()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Measure copy bandwidth and bf16 GEMM throughput.")
    parser.add_argument("--device", choices=sorted(SIZES), required=True)
    for name in ("copy_mib", "gemm_n", "samples", "warmup"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int)
    args = parser.parse_args(argv)
    sizes = {k: v for k, v in vars(args).items() if k != "device" and v is not None}
    print(json.dumps(measure(device=args.device, **{**SIZES[args.device], **sizes})))


if __name__ == "__main__":
    main()
