"""The harness's child process: runs workloads, one at a time, through liger-kernel's own benchmark
code. Started by registry.reruns.harness.session as `python -P -u runner.py`; needs torch and nothing of
KernelIndex or Django.

Requests: one JSON request a line on stdin ({"start": {...}} first, then plans), one JSON answer
a line on the file descriptor named by KERNELINDEX_HARNESS_RESULT_FD. Everything upstream prints
goes to stdout / stderr, which the parent keeps as the job's log.

What is timed is decided by upstream: `utils.build_speed_bench_fn(setup)` or the script's own
`bench_speed_<kernel>`, which call `triton.testing.do_bench`. This process wraps that one
function: the upstream call runs unchanged and gives the source protocol's figures (y50, y20,
y80); right after it, the same callable is timed under KernelIndex's own protocol (timing.py,
docs/protocol.md), whose samples give the controlled run's figures. Memory: `utils._test_memory`
runs unchanged while `max_memory_allocated` is read through a recorder, so the samples are
exactly the peaks upstream took its quantiles of.
"""

import gc
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Recorder:
    """Wraps triton.testing.do_bench and utils._test_memory. The upstream call runs unchanged and
    gives the source protocol's figures; right after it, the same callable is timed under
    KernelIndex's own protocol (timing.sample). Memory: `utils._test_memory` runs unchanged while
    `max_memory_allocated` is read through a recorder (the peaks upstream took its quantiles of),
    with `max_memory_reserved` read beside each peak.

    Only upstream's own benchmark code (`scripts`, its benchmark/scripts folder) is timed so:
    Triton's autotuner also times each candidate config through `triton.testing.do_bench`, and
    those calls get upstream's timer unchanged, as without KernelIndex (the same numbers, so the
    same config chosen). Timed under the protocol, each candidate took seconds: a memory job of an
    autotuned kernel ran for minutes."""

    def __init__(self, do_bench, *, torch, device, timing, stats, scripts: Path | None = None):
        self.do_bench = do_bench
        self.scripts = scripts
        self.parameters = inspect.signature(do_bench).parameters
        self.torch, self.device, self.timing, self.stats = torch, device, timing, stats
        self.settings = {}  # the plan's protocol settings (a block's share of them, while blocked)
        self.calls = []
        self.plan_began = time.perf_counter()
        self.monitor = None  # a block's NVML sampler factory (timing.NvmlSampler), on a GPU
        # Blocks after the first give upstream's code the first block's do_bench answers, call
        # by call, instead of running its timer again: upstream's figure is the first block's.
        self.block = 0
        self.upstream_answers: list = []
        self.upstream_calls = 0

    def timed(self, fn, *args, **kwargs):
        if not self._upstream_calls(sys._getframe(1)):
            return self.do_bench(fn, *args, **kwargs)
        self.torch.set_default_device(None)  # setup is over: what is timed runs as upstream runs it
        bound = dict(zip(self.parameters, (fn, *args), strict=False), **kwargs)
        if bound.get("return_mode") == "all":
            return self.do_bench(fn, *args, **kwargs)
        entered = time.perf_counter()
        if self.block == 0:
            result = self.do_bench(fn, *args, **kwargs)
            self.upstream_answers.append(result)
        else:
            result = self.upstream_answers[min(self.upstream_calls, len(self.upstream_answers) - 1)]
        self.upstream_calls += 1
        upstream_s = time.perf_counter() - entered
        confidence = self.settings["confidence"]
        measured = self.timing.sample(
            self.torch,
            fn,
            grad_to_none=bound.get("grad_to_none"),
            settings=self.settings,
            device=self.device,
            precision_of=lambda samples: self.stats.relative_precision(samples, confidence),
            monitor=self.monitor,
        )
        measured["setup_s"] = entered - self.plan_began
        measured["upstream_s"] = upstream_s
        measured["upstream_call"] = {"warmup_ms": bound.get("warmup", 25), "rep_ms": bound.get("rep", 100)}
        self.calls.append(measured)
        return result

    def _upstream_calls(self, frame) -> bool:
        if self.scripts is None:
            return True
        return Path(frame.f_code.co_filename).resolve().is_relative_to(self.scripts)

    def memory(self, test_memory, accelerator):
        upstream_code = test_memory.__code__

        def recorded(func, *args, **kwargs):
            self.torch.set_default_device(None)  # as in timed()
            peaks, reserved, inside = [], [], []
            real = accelerator.max_memory_allocated
            entered = time.perf_counter()

            def reading(*a, **k):
                value = real(*a, **k)
                # Only the peaks upstream reads after each pass are samples. Code inside a pass
                # may read the allocator too (torch.compile compiling in the first one): those
                # readings are kept apart, counted, not sampled.
                if sys._getframe(1).f_code is upstream_code:
                    peaks.append(value / 2**20)
                    reserved.append(accelerator.max_memory_reserved() / 2**20)
                else:
                    inside.append(value / 2**20)
                return value

            state = self.timing.memory_state_reset(self.torch)
            accelerator.max_memory_allocated = reading
            try:
                return test_memory(func, *args, **kwargs)
            finally:
                accelerator.max_memory_allocated = real
                self.calls.append(
                    {
                        "protocol": "upstream-peak-memory",
                        **state,
                        "samples": peaks,
                        "peak_reserved_mb": reserved,
                        "readings_inside_passes_mb": inside,
                        "setup_s": entered - self.plan_began,
                        "timing_s": time.perf_counter() - entered,
                        "stop": "count",
                    }
                )

        return recorded


def start(options: dict) -> dict:
    """Paths, Triton (or the CPU stand-in), the recorders; once per process."""
    root = Path(options["root"])
    for path in (root, root / "src", root / "benchmark" / "scripts"):
        sys.path.insert(0, str(path))
    device = options["device"]
    real_triton = importlib.util.find_spec("triton") is not None
    if device == "cpu":
        cpu_triton = _load_sibling("cpu_triton")
        if not real_triton:
            cpu_triton.install()
    import torch
    import triton.testing

    if device == "cpu":
        # One thread by default: on a shared machine, intra-op threads that wait for each
        # other turn every timing into noise. The count is part of the captured environment.
        torch.set_num_threads(int(os.environ.get("KERNELINDEX_HARNESS_CPU_THREADS", "1")))
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch sees no CUDA GPU here")
    do_bench = cpu_triton.cpu_do_bench if device == "cpu" else triton.testing.do_bench
    recorder = Recorder(
        do_bench,
        torch=torch,
        device=device,
        timing=_load_sibling("timing"),
        stats=_load_sibling("stats"),
        scripts=(root / "benchmark" / "scripts").resolve(),
    )
    triton.testing.do_bench = recorder.timed
    import utils  # benchmark/scripts/utils.py

    if device == "cuda":
        utils._test_memory = recorder.memory(utils._test_memory, torch.cuda)
    nvml = recorder.timing.Nvml(torch) if device == "cuda" else None
    return {
        "torch": torch,
        "utils": utils,
        "recorder": recorder,
        "nvml": nvml,
        "environment": environment(device, real_triton),
    }


def run(state: dict, plan: dict) -> dict:
    if plan["entry"] == "distributed":  # a tensor-parallel script's per-rank functions
        return _load_sibling("distributed").run(state, plan)
    torch, utils, recorder, nvml = state["torch"], state["utils"], state["recorder"], state["nvml"]
    timing, settings = recorder.timing, plan["protocol"]
    module = importlib.import_module(plan["script"])
    config = {k: _dtype(torch, v) for k, v in plan["config"].items()}
    run_input = utils.SingleBenchmarkRunInput(
        x=plan["x_value"],
        kernel_provider=plan["provider"],
        kernel_operation_mode=plan["operation_mode"],
        extra_benchmark_config=config,
    )
    function = getattr(module, plan["function"])
    warmed_up = upstream_warmup(module, plan.get("warmup", ""), config)
    if plan["entry"] == "setup":
        build = utils.build_speed_bench_fn if plan["metric"] == "latency" else utils.build_memory_bench_fn
        function = build(function)
    # Memory keeps upstream's definition (10 peaks of one setup); latency samples in blocks.
    latency = plan["metric"] == "latency"
    blocks = timing.block_count(settings) if latency else 1
    recorder.settings = timing.block_settings(settings, blocks) if latency else settings
    recorder.monitor = (lambda: timing.NvmlSampler(nvml)) if nvml else None
    recorder.upstream_answers, measured_blocks, output = [], [], None
    for block in range(blocks):
        recorder.block, recorder.upstream_calls, recorder.calls = block, 0, []
        recorder.plan_began = time.perf_counter()
        if block:
            _fresh_block_state(torch)
        answer = _setup_and_time(torch, function, run_input, plan["device"])
        output = answer if output is None else output
        if not recorder.calls:
            raise RuntimeError("the upstream benchmark timed nothing through do_bench or _test_memory")
        measured_blocks.append(recorder.calls[-1])
    calls = len(recorder.calls)
    if latency:
        confidence = settings["confidence"]
        measured = timing.blocks_combine(
            measured_blocks,
            settings=settings,
            precision_of=lambda samples: recorder.stats.relative_precision(samples, confidence),
        )
    else:
        measured = measured_blocks[0]
    samples = measured.pop("samples")
    upstream = {"median": float(output.y_50), "p20": float(output.y_20), "p80": float(output.y_80)}
    if plan["metric"] == "latency":
        median, p20, p80 = recorder.stats.quantiles(samples)
    else:  # memory keeps upstream's definition: quantiles of the peaks it took
        median, p20, p80 = upstream["median"], upstream["p20"], upstream["p80"]
    return {
        "status": "ok",
        "median": median,
        "p20": p20,
        "p80": p80,
        "unit": "ms" if plan["metric"] == "latency" else "MB",
        "samples": samples,
        "measured": {
            "calls": calls,
            **measured,
            **({"upstream_warmup": warmed_up} if warmed_up else {}),
        },
        "upstream": upstream,
        "gpu_uuid": nvml.uuid if nvml else "",
        "gpu_state": timing.sampled_state(measured_blocks, uuid=nvml.uuid) if nvml else {},
        "environment": state["environment"],
        "error": "",
    }


def _setup_and_time(torch, function, run_input, device: str):
    """Upstream's setup and its call to do_bench (timed by the recorder), once.

    Upstream's setup builds modules on the CPU and then moves them (`nn.Linear(...).to(device)`):
    for the vocabulary-sized heads of the losses, seconds of CPU initialisation for each job. The
    setup runs with the job's device as torch's default, so they are built where they end up; the
    recorders restore the default before anything is timed (docs/protocol.md)."""
    torch.set_default_device(device)
    try:
        output = function(run_input)
    finally:
        torch.set_default_device(None)
    if device == "cuda":
        torch.cuda.synchronize()
    return output


def _fresh_block_state(torch) -> None:
    """Between blocks: the previous block's inputs and graphs are released and the caching
    allocator's free blocks returned, so that the next block's inputs are allocated afresh."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _fused_moe_autotune(module, config: dict) -> str:
    """benchmark_fused_moe.py's `__main__` before its sweep: `_warmup_liger` (one forward and
    backward) at the model's base T, with the workload's expert count for the token sweep and
    once per expert count of EXPERT_SWEEP_VALUES for the expert sweep. Triton's autotune key is
    (H, intermediate_dim): the first call, at that T, picks the config every point then uses."""
    base_t = module.QWEN3_MOE_30B.T
    sweep = config["sweep_dim"]
    experts = list(module.EXPERT_SWEEP_VALUES) if sweep == "E" else [config["E"]]
    for expert_count in experts:
        module._warmup_liger(
            base_t, expert_count, config["H"], config["intermediate_dim"], config["K"], config["dtype"], sweep
        )
    return f"_warmup_liger at T={base_t}, E={','.join(map(str, experts))}"


# What a script's `__main__` runs before any benchmark (registry/sources/liger/harness.py, KernelMap.warmup): name -> a
# function of the script's module and the job's config that runs it and says what it ran.
UPSTREAM_WARMUPS = {"fused_moe_autotune": _fused_moe_autotune}


def upstream_warmup(module, name: str, config: dict) -> str:
    """Run upstream's own warm-up `name` (none when empty) before the job's setup; what it ran."""
    return UPSTREAM_WARMUPS[name](module, config) if name else ""


def environment(device: str, real_triton: bool) -> dict:
    import torch

    gpu = torch.cuda.get_device_name() if device == "cuda" else ""
    return {
        "gpu_name": gpu or "CPU",
        "cpu": _cpu_model(),
        "cpu_threads": torch.get_num_threads(),
        "compute_capability": ".".join(map(str, torch.cuda.get_device_capability())) if gpu else None,
        "driver": _driver() if gpu else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _version("triton") if real_triton else None,
        "liger_kernel": _version("liger-kernel"),
        "transformers": _version("transformers"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }


def _dtype(torch, value):
    if isinstance(value, str) and value.startswith("torch."):
        dtype = getattr(torch, value.removeprefix("torch."), None)
        if isinstance(dtype, torch.dtype):
            return dtype
    return value


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


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


def _failure(exc: BaseException) -> dict:
    traceback.print_exc()
    name = type(exc).__name__
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    lowered = message.lower()
    if (
        isinstance(exc, MemoryError)
        or "OutOfMemoryError" in name
        or "out of memory" in lowered
        or "can't allocate memory" in lowered
    ):
        kind = "out of memory"
    elif "CUDA" in message or "cuda" in name.lower():
        kind = "CUDA error"
    else:
        kind = "the upstream benchmark raised"
    return {"status": "failed", "error": f"{kind}: {name}: {message}"[:2000]}


def _limit_memory():
    limit = int(os.environ.get("KERNELINDEX_HARNESS_MEMORY_BYTES", "0") or 0)
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _die_with_parent():
    """Linux: a killed worker takes its harness child with it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main() -> None:
    _die_with_parent()
    _limit_memory()
    answers = os.fdopen(int(os.environ["KERNELINDEX_HARNESS_RESULT_FD"]), "w", buffering=1)
    state = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "start" in request:
                state = start(request["start"])
                answer = {"status": "ready", "environment": state["environment"]}
            else:
                answer = run(state, request["plan"])
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, never raised
            answer = _failure(exc)
        finally:
            gc.collect()
            if state is not None and state["torch"].cuda.is_available():
                state["torch"].cuda.empty_cache()
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
