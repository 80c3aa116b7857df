"""KernelBench's harness mapping: run a problem file's PyTorch reference under KernelIndex's timing
protocol (`kernelindex-cpu-v1` here; `kernelindex-cuda-v1` on a GPU), eager or under
`torch.compile`, with upstream's own way of timing beside it, as the Liger mapping keeps do_bench's.

The problem file is code: it runs only here, in a child process of its own
(`python -m registry.sources.kernelbench.harness`, a JSON spec on stdin, a JSON result on stdout),
never in the web process. No Django: the timing loop and statistics are the harness's own
(registry/reruns/harness/timing.py, registry/stats/medians.py), which import none either (tested).
"""

import gc
import json
import math
import os
import platform
import subprocess
import sys
import time

from registry.reruns.harness import timing
from registry.stats import medians as stats

UPSTREAM_WARMUP, UPSTREAM_TRIALS = 3, 100  # KernelBench's time_execution_with_cuda_event defaults
CONFIGURATIONS = {
    "eager": None,
    "compile-inductor-default": {"backend": "inductor", "mode": None},
}
CHILD_TIMEOUT_S = 600


class HarnessError(RuntimeError):
    pass


def run_spec(spec: dict, *, timeout: float = CHILD_TIMEOUT_S) -> dict:
    """Run one spec ({"problem_text", "implementation", "device", "timing", "seed"}) in a child
    process and return its result; HarnessError with the child's last words on a failure."""
    command = [sys.executable, "-m", "registry.sources.kernelbench.harness"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        done = subprocess.run(
            command,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise HarnessError(f"the harness ran past {timeout:.0f} s") from None
    if done.returncode != 0:
        raise HarnessError(f"the harness failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _significant(value: float, digits: int = 3) -> float:
    return float(f"{value:.{digits}g}")


def upstream_timing(torch, fn, *, device: str, trials: int = UPSTREAM_TRIALS) -> dict:
    """Upstream's figure as KernelBench takes it: 3 warm-up calls, then `trials` calls each timed
    alone (a pair of CUDA events and a synchronize on a GPU; the wall clock on the CPU, which has no
    events), no L2 flush; mean, std, min and max in ms, rounded to three significant digits."""
    for _ in range(UPSTREAM_WARMUP):
        fn()
    times = []
    for _ in range(trials):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            fn()
            times.append((time.perf_counter() - began) * 1000)
    mean = sum(times) / len(times)
    std = math.sqrt(sum((t - mean) ** 2 for t in times) / (len(times) - 1)) if len(times) > 1 else 0.0
    return {
        "mean": _significant(mean),
        "std": _significant(std),
        "min": _significant(min(times)),
        "max": _significant(max(times)),
        "num_trials": trials,
        "timer": "CUDA events" if device == "cuda" else "time.perf_counter (no CUDA events on the CPU)",
    }


def measure(spec: dict) -> dict:
    """In the child: build the reference Model from the problem file, then time it in independent
    blocks (timing.block_count; each with fresh inputs from `get_inputs`, the allocator's cache
    emptied and its own warm-up), reading the card through NVML while each block is timed (on a
    GPU); upstream's figure is taken after the blocks, on the last block's inputs."""
    import torch

    device = spec.get("device", "cpu")
    configuration = CONFIGURATIONS[spec.get("implementation", "eager")]
    seed = spec.get("seed", 0)
    torch.manual_seed(seed)
    namespace: dict = {"__name__": "kernelbench_problem"}
    exec(compile(spec["problem_text"], "problem.py", "exec"), namespace)  # noqa: S102 - the child exists to run it
    # Built where it runs: the newest problems' inputs reach gigabytes, which the CPU took about
    # 10 s to draw for each block on an H200 host (2026-12-06); drawn on the GPU they take
    # milliseconds. The values differ from the CPU's draw, their shapes and dtypes do not.
    with torch.device(device):
        model = namespace["Model"](*namespace["get_init_inputs"]()).to(device).eval()
    if configuration is not None:
        model = compiled(torch, model, configuration)
    settings = spec["timing"]
    blocks = timing.block_count(settings)
    per_block = timing.block_settings(settings, blocks)
    nvml = timing.Nvml(torch) if device == "cuda" else None
    monitor = (lambda: timing.NvmlSampler(nvml)) if nvml is not None else None
    measured_blocks, call = [], None
    for block in range(blocks):
        if block:
            _fresh_block_state(torch)
        began = time.perf_counter()
        torch.manual_seed(seed + block)
        with torch.device(device):
            inputs = [x.to(device) if hasattr(x, "to") else x for x in namespace["get_inputs"]()]
        call = _caller(torch, model, inputs)
        setup_s = time.perf_counter() - began
        sampled = timing.sample(
            torch,
            call,
            grad_to_none=None,
            settings=per_block,
            device=device,
            precision_of=lambda s: stats.relative_precision(s, per_block["confidence"]),
            monitor=monitor,
        )
        measured_blocks.append({**sampled, "setup_s": setup_s})
    sampled = timing.blocks_combine(
        measured_blocks,
        settings=settings,
        precision_of=lambda s: stats.relative_precision(s, settings["confidence"]),
    )
    samples = sampled.pop("samples")
    if configuration is not None:
        sampled["program"] = compiled_program(namespace)
    p50, p20, p80 = stats.quantiles(samples)
    interval = stats.median_interval(samples)
    return {
        "median": p50,
        "p20": p20,
        "p80": p80,
        "ci_low": interval[0] if interval else None,
        "ci_high": interval[1] if interval else None,
        "samples": samples,
        "sampling": sampled,
        "upstream": upstream_timing(
            torch, call, device=device, trials=spec.get("upstream_trials", UPSTREAM_TRIALS)
        ),
        "gpu_uuid": nvml.uuid if nvml is not None else "",
        "gpu_state": timing.sampled_state(measured_blocks, uuid=nvml.uuid) if nvml is not None else {},
        "environment": {
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "gpu_name": torch.cuda.get_device_name() if device == "cuda" else "CPU",
        },
    }


def _caller(torch, model, inputs):
    def call():
        with torch.no_grad():
            return model(*inputs)

    return call


def _fresh_block_state(torch) -> None:
    """Between blocks: the previous block's inputs released and the caching allocator's free
    blocks returned, so that the next block's inputs are allocated afresh."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def compiled(torch, model, configuration: dict):
    """`torch.compile` of a problem's model as if it were the first this process compiled. A served
    process compiles problem after problem, each from a file named `problem.py`, and TorchDynamo
    keeps what it saw of a function by file name, first line and name (its automatic dynamic
    shapes): without the reset, a problem whose `forward` sits at the line of an earlier one's
    is compiled with the sizes that differ made symbolic, a program for any size and not the
    problem's own (up to 2.6 times slower: docs/reports/2026-12-07-kernelbench-compiled-programs.md).
    Recorded as the job's `sampling.program`."""
    torch._dynamo.reset()
    return torch.compile(model, backend=configuration["backend"], mode=configuration["mode"])


def compiled_program(namespace: dict) -> dict:
    """{"sizes": …, "dynamic": …}: what TorchDynamo holds for the arguments of the problem's
    `Model.forward` (its automatic dynamic shapes, keyed by file name, first line and name;
    `L['x']` for an argument `x`): each tensor's sizes, "s" where a size is symbolic, "s" alone
    where its number of dimensions changed too (a number: "s" or its value). The state after a
    compile is the one that compile used. What it holds of other sources is left out: attributes
    of an earlier problem's modules are not this problem's, and TorchDynamo specializes the whole
    numbers of an `nn.Module` whatever the state says (the shipped jobs whose state marked their
    modules' numbers symbolic ran as fast as the same problems compiled alone: GPU-4d57d9ff,
    2026-12-07)."""
    from torch._dynamo import pgo

    code = namespace["Model"].forward.__code__
    state = pgo.get_code_state().get(pgo.CodeId.make(code))
    if state is None:
        return {"sizes": {}, "dynamic": False}
    arguments = {f"L['{name}']" for name in code.co_varnames[1 : code.co_argcount]}
    out = {}
    for source, entry in sorted(state.automatic_dynamic.items()):
        if source not in arguments:
            continue
        if isinstance(entry.size, pgo.AutoDynamic):  # its rank changed too
            out[source] = "s"
        elif entry.size is not None:
            out[source] = [_size(d, pgo) for d in entry.size]
        else:
            out[source] = _size(entry.scalar, pgo)
    return {"sizes": out, "dynamic": any("s" in (v if isinstance(v, list) else [v]) for v in out.values())}


def _size(value, pgo):
    if isinstance(value, pgo.AutoDynamic):
        return "s"
    return value if isinstance(value, int | float) else repr(value)


def serve(lines, write) -> None:
    """Measure one spec per line of `lines`, writing one JSON line per spec: {"result": ...} or
    {"error": "..."} for a problem that raised (the next spec still runs). A fault that kills the
    process (a CUDA error that poisons the context, say) ends it: the caller starts another for
    the next spec (registry/sources/kernelbench/gpu_sweep.py). One process serves many problems so
    that the GPU's time goes to timing, not to importing torch again for each."""
    for line in lines:
        if not line.strip():
            continue
        try:
            answer = {"result": measure(json.loads(line))}
        except Exception as exc:  # noqa: BLE001 - one problem's failure is its answer, not the server's end
            answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        write(json.dumps(answer) + "\n")


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        serve(sys.stdin, lambda text: (sys.stdout.write(text), sys.stdout.flush()))
        return
    spec = json.loads(sys.stdin.read())
    json.dump(measure(spec), sys.stdout)


if __name__ == "__main__":
    main()
