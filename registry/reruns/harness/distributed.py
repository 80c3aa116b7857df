"""Tensor-parallel workloads (megatron_cross_entropy) through liger-kernel's own per-rank functions,
on `world_size` processes joined by torch.distributed. Needs torch and nothing of KernelIndex or Django.

benchmark_megatron_cross_entropy.py has no setup_<kernel> and no bench function of one
SingleBenchmarkRunInput: its main() spawns `--tp-size` ranks with mp.spawn, and each rank's `_worker`
sweeps every vocabulary size and provider and writes the CSV. What one row of it measured is one call
of the per-rank functions, inside a process group of TP ranks:

    _bench_speed_one(provider, mode, S, B, V, TP, tp_group, device)  -> (ms_50, ms_20, ms_80)
    _bench_memory_one(provider, S, B, V, TP, tp_group, device)       -> (mb_50, mb_20, mb_80)

This module runs exactly that for one plan, as `_worker` does: a file:// rendezvous, NCCL (gloo on a
CPU), one GPU a rank (cuda:<rank>), and `tp_group = dist.group.WORLD` even for one rank (the
cross-entropy asks the group for its rank and size). The figures are rank 0's, as upstream records.

- world_size 1: in the calling process (the harness child: the runner's hook calls `run`).
- world_size > 1: `world_size` processes of this file (`python -P -u distributed.py`), one a rank,
  started by the calling process, which waits for all of them; a rank that fails ends the others
  (they would wait in a collective for ever). They are in the caller's process group, so a harness
  child killed at its time limit takes them with it, and each dies with its parent.

NVLink multicast stays off in every rank (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1): on shared multi-GPU hosts a program that uses it can take the GPUs down.

Samples. Upstream times 5 loops of 50 calls (`_timed_loop`) and takes quantiles of the 5 loop means:
those are the source protocol's figures (`upstream`), and the means are kept as `loop_samples_ms`.
Then the step upstream timed is sampled under KernelIndex's protocol (plan["protocol"]):
- one rank: `timing.sample`, exactly as the runner samples a do_bench callable (L2 flush, CUDA events,
  stop on precision or budget);
- several ranks: a stop on precision would end each rank at its own count and desynchronise the
  collectives, so every rank takes the same count: the most the budget allows at upstream's per-call
  time (at least min_samples, at most max_samples), the least over the ranks (an all-reduce), each
  sample one call after the same L2 flush; the precision reached is reported.
Memory keeps upstream's definition: the peaks it read through torch.cuda.max_memory_allocated.
"""

import importlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
POLL_S = 0.05
FAILURE_GRACE_S = 2.0  # how long the other ranks get to exit after one failed


class RankFailed(RuntimeError):
    pass


def run(state: dict, plan: dict) -> dict:
    """The runner's hook for a plan whose entry is "distributed", with the runner's state (torch,
    the upstream `utils` module, the recorder with its timing and stats modules, NVML, the
    environment). The answer has the runner's shape."""
    root = Path(state["utils"].__file__).resolve().parents[2]
    recorder, nvml = state.get("recorder"), state.get("nvml")
    before = nvml.state() if nvml else {}
    result = measure(root, plan, recorder=recorder)
    after = nvml.state() if nvml else {}
    result["environment"] = {**state.get("environment", {}), "world_size": plan["world_size"]}
    result["gpu_uuid"] = nvml.uuid if nvml else ""
    result["gpu_state"] = (
        {"before": before, "after": after, "throttled": recorder.timing.throttled(before, after)}
        if nvml
        else {}
    )
    return result


def measure(root, plan: dict, *, recorder=None, spawn: bool | None = None) -> dict:
    """Run one plan on plan["world_size"] ranks. `spawn` (default: only for more than one rank)
    starts the ranks as processes of this file; `recorder` is the runner's (its timing and stats
    modules), else this folder's are loaded."""
    root, world_size = Path(root), int(plan["world_size"])
    spawn = world_size > 1 if spawn is None else spawn
    os.environ.update(MULTICAST_OFF)
    with tempfile.TemporaryDirectory(prefix="kernelindex-tp-") as tmp:
        rendezvous = str(Path(tmp) / "rendezvous")
        if spawn:
            ranks = _spawn(root, plan, Path(tmp))
        else:
            _paths(root)
            ranks = [rank_run(0, 1, rendezvous, plan, recorder)]
    first = ranks[0]
    measured = {
        key: value for key, value in first.items() if key not in ("samples", "upstream", "rank", "device")
    }
    measured.update(
        calls=1,
        world_size=world_size,
        ranks=[{"rank": r["rank"], "device": r["device"], "median": r["median"]} for r in ranks],
    )
    return {
        "status": "ok",
        "median": first["median"],
        "p20": first["p20"],
        "p80": first["p80"],
        "unit": "ms" if plan["metric"] == "latency" else "MB",
        "samples": first["samples"],
        "measured": measured,
        "upstream": first["upstream"],
        "error": "",
    }


def rank_run(rank: int, world_size: int, rendezvous: str, plan: dict, recorder=None) -> dict:
    """One rank: join the group, call the upstream per-rank function, sample, leave the group."""
    import torch
    import torch.distributed as dist

    timing = recorder.timing if recorder is not None else _load_sibling("timing")
    stats = recorder.stats if recorder is not None else _load_sibling("stats")
    settings = plan["protocol"]  # harness.run_job_spec puts settings.CONTROLLED_TIMING there
    os.environ.update(MULTICAST_OFF)
    cuda = plan["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend="nccl" if cuda else "gloo",
        init_method=f"file://{rendezvous}",
        rank=rank,
        world_size=world_size,
    )
    try:
        module = importlib.import_module(plan["script"])
        device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
        config = plan["config"]
        # Upstream's per-rank arguments after the provider (and the pass, for speed).
        rank_args = (config["S"], config["B"], plan["x_value"], world_size, dist.group.WORLD, device)
        if plan["metric"] == "latency":
            figures, samples, quantiles, extra = _latency(
                torch, dist, module, plan, rank_args, settings, timing, stats
            )
        else:
            figures, samples, quantiles, extra = _memory(torch, module, plan, rank_args, timing)
        median, p20, p80 = quantiles
        upstream = dict(zip(("median", "p20", "p80"), (float(f) for f in figures), strict=True))
        return {
            "rank": rank,
            "device": str(device),
            "median": median,
            "p20": p20,
            "p80": p80,
            "samples": [float(x) for x in samples],
            "upstream": upstream,
            **extra,
        }
    finally:
        dist.destroy_process_group()


def _latency(torch, dist, module, plan: dict, rank_args: tuple, settings: dict, timing, stats) -> tuple:
    """Upstream's speed function, its timed loops watched (`_timed_loops`), then the step they
    timed sampled under KernelIndex's protocol: as the runner samples on one rank, in lockstep on
    several. (figures, samples, their quantiles, what else the rank reports)."""
    world_size, group, device = rank_args[3:]  # S, B, V, then these (upstream's order)
    began = time.perf_counter()
    figures, loops, steps = _timed_loops(
        module,
        lambda: getattr(module, plan["function"])(plan["provider"], plan["operation_mode"], *rank_args),
    )
    upstream_s = time.perf_counter() - began
    step = steps[-1][0]
    precision_of = lambda samples: stats.relative_precision(samples, settings["confidence"])  # noqa: E731
    if world_size == 1:
        measured = timing.sample(
            torch,
            step,
            grad_to_none=None,
            settings=settings,
            device=plan["device"],
            precision_of=precision_of,
        )
    else:
        measured = _lockstep(torch, dist, group, device, step, statistics.median(loops), settings)
        measured["precision"] = precision_of(measured["samples"])
    samples = measured.pop("samples")
    extra = {
        **measured,
        "upstream_s": upstream_s,
        "loop_samples_ms": loops,
        "upstream_call": {"loops": len(loops), "calls_per_loop": steps[-1][1]},
    }
    return figures, samples, stats.quantiles(samples), extra


def _timed_loops(module, call) -> tuple:
    """`call()` with the script's `_timed_loop` watched: upstream's figures, each loop's per-call
    mean (ms), and each loop's step with its count of calls."""
    loops, steps = [], []
    real_loop = module._timed_loop

    def timed_loop(fn, tp_group, n_iters):
        per_call_ms = real_loop(fn, tp_group, n_iters)
        loops.append(float(per_call_ms))
        steps.append((fn, n_iters))
        return per_call_ms

    module._timed_loop = timed_loop
    try:
        figures = call()
    finally:
        module._timed_loop = real_loop
    return figures, loops, steps


def _memory(torch, module, plan: dict, rank_args: tuple, timing) -> tuple:
    """Upstream's memory function, with upstream's definition: the peaks it reads through
    torch.cuda.max_memory_allocated (watched, to keep each one and the reserved peak beside it).
    (figures, samples, their quantiles, what else the rank reports)."""
    began = time.perf_counter()
    peaks, reserved, real_peak = [], [], torch.cuda.max_memory_allocated

    def peak(*args, **kwargs):
        value = real_peak(*args, **kwargs)
        peaks.append(value / 2**20)
        reserved.append(torch.cuda.max_memory_reserved() / 2**20)
        return value

    state = timing.memory_state_reset(torch)
    torch.cuda.max_memory_allocated = peak
    try:
        figures = getattr(module, plan["function"])(plan["provider"], *rank_args)
    finally:
        torch.cuda.max_memory_allocated = real_peak
    extra = {
        "protocol": "upstream-peak-memory",
        **state,
        "peak_reserved_mb": reserved,
        "timing_s": time.perf_counter() - began,
        "stop": "count",
    }
    return figures, peaks, tuple(float(f) for f in figures), extra


def _lockstep(torch, dist, group, device, step, per_call_ms, settings) -> dict:
    """Every rank times `step` the same number of times, one call a sample after an L2 flush:
    as many as the budget allows at upstream's per-call time, the least over the ranks."""
    cuda = device.type == "cuda"
    count = settings["budget_s"] * 1000 / max(per_call_ms, 1e-3)
    count = int(min(max(count, settings["min_samples"]), settings["max_samples"]))
    agreed = torch.tensor([count], dtype=torch.int64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN, group=group)
    count = int(agreed.item())
    flush = None
    if cuda:
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        flush = torch.empty(int(l2 * settings["flush_factor"]), dtype=torch.int8, device=device)
    dist.barrier(group=group)
    began = time.perf_counter()
    samples = []
    if not cuda:
        for _ in range(count):
            start = time.perf_counter()
            step()
            samples.append((time.perf_counter() - start) * 1000)
    else:
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)
        ]
        for start, end in pairs:
            flush.zero_()
            start.record()
            step()
            end.record()
        torch.cuda.synchronize()
        samples = [start.elapsed_time(end) for start, end in pairs]
    return {
        "protocol": "kernelindex-lockstep-ranks",
        "samples": samples,
        "stop": "count",
        "target_precision": settings["precision"],
        "confidence": settings["confidence"],
        "timing_s": time.perf_counter() - began,
        "flush_bytes": flush.numel() if flush is not None else 0,
    }


def _spawn(root: Path, plan: dict, tmp: Path) -> list[dict]:
    world_size = int(plan["world_size"])
    if plan["device"] == "cuda":
        import torch

        if torch.cuda.device_count() < world_size:
            raise RankFailed(
                f"{plan['kernel']} with TP = {world_size} needs {world_size} GPUs, one a rank; "
                f"this worker sees {torch.cuda.device_count()}"
            )
    env = {**os.environ, **MULTICAST_OFF, "PYTHONUNBUFFERED": "1"}
    env.pop("KERNELINDEX_HARNESS_RESULT_FD", None)
    processes = []
    try:
        for rank in range(world_size):
            request = {
                "root": str(root),
                "rank": rank,
                "world_size": world_size,
                "rendezvous": str(tmp / "rendezvous"),
                "plan": plan,
                "result": str(tmp / f"rank-{rank}.json"),
            }
            process = subprocess.Popen(
                [sys.executable, "-P", "-u", str(Path(__file__).resolve())],
                stdin=subprocess.PIPE,
                env=env,
                cwd=str(tmp),
            )
            process.stdin.write(json.dumps(request).encode())
            process.stdin.close()
            processes.append(process)
        while True:
            codes = [process.poll() for process in processes]
            if any(code not in (None, 0) for code in codes):
                raise RankFailed(_first_failure(processes, tmp))
            if all(code == 0 for code in codes):
                break
            time.sleep(POLL_S)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    return [json.loads((tmp / f"rank-{rank}.json").read_text()) for rank in range(world_size)]


def _first_failure(processes, tmp: Path) -> str:
    """Which rank failed first and how: the others then fail too, on a broken collective."""
    deadline = time.monotonic() + FAILURE_GRACE_S
    while time.monotonic() < deadline and any(process.poll() is None for process in processes):
        time.sleep(POLL_S)
    errors = []
    for rank, process in enumerate(processes):
        path = tmp / f"rank-{rank}.error"
        if path.is_file():
            error = json.loads(path.read_text())
            errors.append((error["at"], rank, error["error"]))
        elif process.poll() not in (None, 0):
            errors.append((math.inf, rank, f"exited with status {process.poll()}"))
    at, rank, error = min(errors)
    return f"rank {rank} of {len(processes)} failed first: {error}"


def _paths(root: Path) -> None:
    """As the runner's start(): the scripts first, then liger-kernel's src, then the sdist root."""
    for path in (root, root / "src", root / "benchmark" / "scripts"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def _load_sibling(name):
    path = HERE / f"{name}.py"
    if name == "stats" and not path.exists():
        # The statistics are the web side's too: in the repository they live in
        # registry/stats/medians.py; the kit ships them here as stats.py (kit/build.py).
        path = HERE.parents[1] / "stats" / "medians.py"
    spec = importlib.util.spec_from_file_location(f"kernelindex_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    """One rank process: a JSON request on stdin, its figures written to request["result"]."""
    _load_sibling("runner")._die_with_parent()
    request = json.loads(sys.stdin.read())
    _paths(Path(request["root"]))
    if request["plan"]["device"] == "cpu" and importlib.util.find_spec("triton") is None:
        _load_sibling("cpu_triton").install()
    try:
        figures = rank_run(request["rank"], request["world_size"], request["rendezvous"], request["plan"])
    except BaseException as exc:  # noqa: BLE001 - the traceback goes to the job's log, the error to the parent
        traceback.print_exc()
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        error = {"at": time.time(), "error": f"{type(exc).__name__}: {message}"[:1000]}
        Path(request["result"]).with_suffix(".error").write_text(json.dumps(error))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    Path(request["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
