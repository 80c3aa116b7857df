"""KernelIndex's own timing loop (protocols `kernelindex-cuda-v1` and `kernelindex-cpu-v1`), and the
GPU's state read through NVML. Runs in the harness's child process; needs torch (numpy and scipy
through stats.py), nothing of KernelIndex or Django. docs/protocol.md is the description.

The work timed is upstream's: the callable that liger-kernel's benchmark code hands to
`triton.testing.do_bench`. Only the loop around it is ours:
- warm-up: calls until at least `warmup_ms` and `warmup_calls` have passed;
- each sample: one call, timed with a pair of CUDA events, after the gradients upstream names are
  cleared and a buffer of at least twice the L2 cache is written (so no call finds the previous
  call's data in L2), and behind a spin kernel that keeps the GPU busy while the host queues the
  call (so the events time the device's work, not the host's kernel launches), and the host's
  time to queue each call is read beside it: a call that took the host longer to queue than the
  spin ahead of it lasted may have kept the GPU waiting, so its time includes the host's pace
  (`host_paced_samples`);
- stop on precision: once there are `min_samples`, every `check_every` samples, when the
  distribution-free `confidence` interval of the median lies within ±`precision` of the median;
  or when `budget_s` of sampling has passed, whichever comes first (the result says which).

A latency measurement is sampled in `blocks` (at least MIN_BLOCKS) independent blocks
(`block_settings`, `blocks_combine`): each block runs upstream's setup again (fresh inputs), after
the allocator's cache is emptied, and warms up again, so that what stays fixed inside one block
(where the allocator put the inputs, the clocks the card settled at) varies between blocks and the
interval of the median can carry that variance (registry/stats). Each sample keeps its block id
(`sample_blocks`). While a block is timed, `NvmlSampler` reads the card's SM clock, power,
temperature and clock-event reasons at SAMPLER_HZ in a thread, and the block keeps their ranges.
"""

import math
import statistics
import threading
import time

# NVML's clock-event (throttle) reasons, by bit. "Throttled" = any that slows the clocks down.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
SLOWDOWNS = {
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
}
# The spin ahead of each sample: twice the host's time to queue one call, within these bounds, in
# cycles at the nominal 2 GHz of an H200's SM clock. A call that takes the host over half the
# upper bound to queue gets a spin that may not cover it.
LEAD_MIN_S, LEAD_MAX_S, NOMINAL_HZ = 50e-6, 20e-3, 2e9
LEAD_CAP_CYCLES = int(LEAD_MAX_S * NOMINAL_HZ)
# The protocol's sampling settings, defined once (docs/protocol.md): sample until the 99% interval
# of the median is within ±0.5% of it, with at least 30 samples, for at most `budget_s` seconds.
# The site's settings.CONTROLLED_TIMING is these with the budget from the environment; the worker
# passes that to run_job_spec, the recorder and the kit to protocol_for.
DEFAULT_SETTINGS = {
    "budget_s": 3.0,
    "min_samples": 30,
    "max_samples": 100_000,
    "precision": 0.005,
    "confidence": 0.99,
    "check_every": 10,
    "warmup_ms": 25.0,
    "warmup_calls": 3,
    "flush_factor": 2.0,
    # Independent blocks of a latency measurement (at least MIN_BLOCKS): each with upstream's setup
    # run again, the allocator's cache emptied and its own warm-up.
    "blocks": 3,
}
CUDA_PROTOCOL = "kernelindex-cuda-v1"
CPU_PROTOCOL = "kernelindex-cpu-v1"


MIN_BLOCKS = 3
# How often the sampler reads the card while a block is timed: at 10 Hz or more, a power cap that
# arrives during a block of a second or two shows in several readings.
SAMPLER_HZ = 20.0
GPU_SAMPLED = ("sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c")


def protocol_core(device: str, timing: dict) -> dict:
    """What a latency protocol of this loop says of itself, whatever harness drives it (the Liger
    scripts' or a KernelBench problem's): its name, timer, comparability family and stopping rule,
    from the timing settings it ran under."""
    stopping = {
        "minSamples": timing["min_samples"],
        "confidence": timing["confidence"],
        "precision": timing["precision"],
        "interval": "distribution-free interval of the median from order statistics",
        "warmupMs": timing["warmup_ms"],
        "warmupCalls": timing["warmup_calls"],
    }
    if device == "cpu":
        return {
            "name": CPU_PROTOCOL,
            "timer": "CPU wall clock (time.perf_counter), one call per sample",
            "comparabilityFamily": "kernelindex/cpu-v1",
            "stopping": {**stopping, "blocks": timing["blocks"]},
        }
    return {
        "name": CUDA_PROTOCOL,
        "timer": "CUDA events, one call per sample, the L2 cache flushed before each",
        "comparabilityFamily": "kernelindex/cuda-v1",
        "stopping": {**stopping, "l2FlushFactor": timing["flush_factor"], "blocks": timing["blocks"]},
    }


def sample(torch, fn, *, grad_to_none, settings: dict, device: str, precision_of, monitor=None) -> dict:
    """Time `fn` under the protocol (one block); `precision_of(samples)` is the relative
    half-width of the median's interval (stats.relative_precision at settings["confidence"]).
    `monitor`, where given, makes a context manager that is entered while the samples are taken
    (NvmlSampler) and whose `summary()` the result keeps as `gpu`."""
    cuda = device == "cuda"
    flush = _flush_buffer(torch, settings) if cuda else None
    began = time.perf_counter()
    warmup_calls = 0
    while (
        warmup_calls < settings["warmup_calls"]
        or (time.perf_counter() - began) * 1000 < settings["warmup_ms"]
    ):
        fn()
        if cuda:
            torch.cuda.synchronize()
        warmup_calls += 1
    warmed = time.perf_counter()
    lead_cycles, spin_ms = _lead(torch, fn) if cuda else (0, 0.0)
    watcher = monitor() if monitor is not None else None
    with watcher if watcher is not None else _nothing():
        samples, queued, stop, precision = _sample_until(
            torch,
            fn,
            grad_to_none,
            flush,
            lead_cycles,
            settings,
            precision_of,
            deadline=warmed + settings["budget_s"],
        )
    finished = time.perf_counter()
    return {
        "protocol": CUDA_PROTOCOL if cuda else CPU_PROTOCOL,
        "samples": samples,
        "stop": stop,
        # None while the samples give no finite interval (a slow op that met its budget with a
        # handful of calls): JSON has no infinity, and the job's result must stay valid JSON.
        "precision": precision if math.isfinite(precision) else None,
        "target_precision": settings["precision"],
        "confidence": settings["confidence"],
        "warmup_calls": warmup_calls,
        "warmup_s": warmed - began,
        "timing_s": finished - warmed,
        "flush_bytes": flush.numel() if flush is not None else 0,
        "lead_cycles": lead_cycles,
        **(_host_pace(queued, spin_ms) if cuda else {}),
        **({"gpu": watcher.summary()} if watcher is not None else {}),
    }


def _sample_until(torch, fn, grad_to_none, flush, lead_cycles, settings, precision_of, *, deadline):
    """Samples until the precision is reached, or the budget or the most samples are spent:
    (samples, host queueing times, why it stopped, the precision reached)."""
    samples, queued, stop, precision = [], [], "budget", float("inf")
    while True:
        samples.extend(
            _timed_batch(torch, fn, grad_to_none, flush, settings["check_every"], lead_cycles, queued)
        )
        if len(samples) >= settings["min_samples"]:
            precision = precision_of(samples)
            if precision <= settings["precision"]:
                stop = "precision"
                break
        if time.perf_counter() >= deadline or len(samples) >= settings["max_samples"]:
            precision = precision_of(samples)  # what it reached, even short of min_samples
            break
    return samples, queued, stop, precision


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def block_count(settings: dict) -> int:
    """How many independent blocks a latency measurement takes: the settings' `blocks`, never
    fewer than MIN_BLOCKS."""
    return max(int(settings.get("blocks") or MIN_BLOCKS), MIN_BLOCKS)


def block_settings(settings: dict, blocks: int) -> dict:
    """One block's share of the protocol: the budget, the least and the most samples divided
    between the blocks, and each block's own interval allowed √blocks as wide as the target,
    since the median over `blocks` blocks of equal spread is about √blocks as precise as one."""
    return {
        **settings,
        "budget_s": settings["budget_s"] / blocks,
        "min_samples": max(math.ceil(settings["min_samples"] / blocks), 2),
        "max_samples": max(math.ceil(settings["max_samples"] / blocks), 2),
        "precision": settings["precision"] * math.sqrt(blocks),
    }


# What each block keeps of its own sample() result; the rest is summed or pooled below.
BLOCK_FIELDS = (
    "stop",
    "precision",
    "warmup_calls",
    "warmup_s",
    "timing_s",
    "lead_cycles",
    "spin_ms",
    "host_queue_ms",
    "host_paced_samples",
    "setup_s",
    "gpu",
)


def blocks_combine(blocks: list[dict], *, settings: dict, precision_of) -> dict:
    """One measurement from its blocks' sample() results: the samples in block order with each
    sample's block id (`sample_blocks`), each block's own figures (`blocks`), and the totals the
    pages read. `precision` is the pooled samples' within-job interval; the interval of the
    median that carries the variance between blocks is registry/stats' to compute."""
    samples = [value for block in blocks for value in block["samples"]]
    precision = precision_of(samples)
    first = blocks[0]
    paced = [block["host_paced_samples"] for block in blocks if "host_paced_samples" in block]
    combined = {
        **{key: value for key, value in first.items() if key not in (*BLOCK_FIELDS, "samples")},
        "samples": samples,
        "sample_blocks": [number for number, block in enumerate(blocks) for _ in block["samples"]],
        "blocks": [{"samples": len(block["samples"]), **_kept(block)} for block in blocks],
        "stop": "precision" if all(block["stop"] == "precision" for block in blocks) else "budget",
        "precision": precision if math.isfinite(precision) else None,
        "target_precision": settings["precision"],
        "warmup_calls": sum(block["warmup_calls"] for block in blocks),
        "warmup_s": sum(block["warmup_s"] for block in blocks),
        "timing_s": sum(block["timing_s"] for block in blocks),
        "setup_s": first.get("setup_s"),
        "lead_cycles": max(block["lead_cycles"] for block in blocks),
    }
    if paced:
        combined["spin_ms"] = min(block["spin_ms"] for block in blocks)
        queues = [block["host_queue_ms"] for block in blocks if block.get("host_queue_ms") is not None]
        combined["host_queue_ms"] = statistics.median(queues) if queues else None
        combined["host_paced_samples"] = sum(paced)
    return combined


def _kept(block: dict) -> dict:
    return {key: block[key] for key in BLOCK_FIELDS if key in block}


def _host_pace(queued: list[float], spin_ms: float) -> dict:
    """How long the host took to queue each timed call (ms), against the spin ahead of it: the
    samples whose call took longer to queue than the spin lasted may include time the GPU spent
    waiting on the host (Python, the driver, a synchronising call inside the pass), which another
    host need not match."""
    return {
        "spin_ms": spin_ms,
        "host_queue_ms": statistics.median(queued) if queued else None,
        "host_paced_samples": sum(q > spin_ms for q in queued),
    }


def median_host_paced(host_paced_samples: int, sample_count: int) -> bool:
    """Half the samples or more host-paced: their median, the job's figure, is then a host-paced
    call's time (or lies between two such), so it includes the host's pace."""
    return sample_count > 0 and 2 * host_paced_samples >= sample_count


def _timed_batch(torch, fn, grad_to_none, flush, count: int, lead_cycles: int, queued: list) -> list[float]:
    """`count` samples (ms); on a GPU, the host's time to queue each call is appended to `queued`."""
    if flush is None:
        times = []
        for _ in range(count):
            _clear_grads(grad_to_none)
            began = time.perf_counter()
            fn()
            times.append((time.perf_counter() - began) * 1000)
        return times
    pairs = []
    for _ in range(count):
        _clear_grads(grad_to_none)
        flush.zero_()
        # The GPU spins while the host queues the call: the events then time the device's work,
        # not the gaps of a host that launches kernels slower than the GPU runs them.
        torch.cuda._sleep(lead_cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        began = time.perf_counter()
        fn()
        queued.append((time.perf_counter() - began) * 1000)
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def _lead(torch, fn) -> tuple[int, float]:
    """GPU clock cycles to spin before each sample (twice the host's time to queue one call,
    within LEAD_MIN_S and LEAD_MAX_S at NOMINAL_HZ), and how long that spin lasts on this card at
    its clocks now, in ms (timed with CUDA events)."""
    torch.cuda.synchronize()
    began = time.perf_counter()
    fn()
    queued = time.perf_counter() - began
    torch.cuda.synchronize()
    cycles = int(min(max(2 * queued, LEAD_MIN_S), LEAD_MAX_S) * NOMINAL_HZ)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles, start.elapsed_time(end)


def _clear_grads(grad_to_none) -> None:
    for tensor in grad_to_none or ():
        tensor.grad = None


def _flush_buffer(torch, settings: dict):
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    size = max(int(l2 * settings["flush_factor"]), 1 << 20)
    return torch.empty(size, dtype=torch.int8, device="cuda")


# NVML -------------------------------------------------------------------------------------------


def memory_state_reset(torch) -> dict:
    """The memory protocol's starting state, the same whatever ran before in this process: frees
    the cuBLAS and cuBLASLt workspaces that torch keeps per handle and stream once a matmul has
    run (allocated through the caching allocator, so a later peak counted them; 32 MiB each on
    Hopper), and the cached blocks. The pass recreates any workspace it needs itself, so a peak
    counts the workspaces that pass uses and no other. Returns what it freed and what stays
    allocated (the inputs upstream's setup built), in MiB."""
    cuda = torch.cuda
    if not cuda.is_available():
        return {}
    before = cuda.memory_allocated()
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    cuda.empty_cache()
    after = cuda.memory_allocated()
    return {"workspaces_freed_mb": (before - after) / 2**20, "allocated_at_start_mb": after / 2**20}


class Nvml:
    """The GPU in use, through NVML. NVML's device index ignores CUDA_VISIBLE_DEVICES: the handle
    is looked up by the UUID (or PCI bus id) torch reports for the current device."""

    def __init__(self, torch):
        self.handle, self.uuid, self.error = None, "", ""
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = str(getattr(props, "uuid", "") or "")
        self.uuid = uuid if not uuid or uuid.startswith("GPU-") else f"GPU-{uuid}"
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            if self.uuid:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(self.uuid)
            else:
                bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
                self.uuid = _text(pynvml.nvmlDeviceGetUUID(self.handle))
        except Exception as exc:  # noqa: BLE001 - no NVML is a recorded fact, not a failure
            self.error = f"NVML unavailable: {type(exc).__name__}: {exc}"[:300]

    def state(self) -> dict:
        if self.handle is None:
            return {"error": self.error}
        nvml, handle = self.nvml, self.handle
        reading = {}
        for key, read in (
            ("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            ("memory_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            ("temperature_c", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            ("power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000),
            ("reasons", lambda: _reasons(nvml, handle)),
        ):
            try:
                reading[key] = read()
            except Exception as exc:  # noqa: BLE001 - one unreadable sensor is recorded as such
                reading[key] = None
                reading.setdefault("errors", []).append(f"{key}: {type(exc).__name__}")
        return reading


class NvmlSampler:
    """Reads the card (an `Nvml`) every 1/`hz` s in a thread while a block is timed: a context
    manager, entered just before the first timed call and left after the last. Its `summary()`
    is the block's GPU state: how many readings at what rate, the least, median and most of each
    figure, and the share of readings that carried each clock-event reason. NVML's reads release
    the GIL in its C library; the thread holds it only to store a reading."""

    def __init__(self, nvml, *, hz: float = SAMPLER_HZ, clock=time.perf_counter):
        self.nvml, self.interval, self.clock = nvml, 1 / hz, clock
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self.began = self.ended = None

    def __enter__(self):
        self.began = self.clock()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.ended = self.clock()
        return False

    def _run(self) -> None:
        while True:
            self.readings.append(self.nvml.state())
            if self._stop.wait(self.interval):
                break

    def summary(self) -> dict:
        if getattr(self.nvml, "handle", None) is None:
            return {"error": getattr(self.nvml, "error", "") or "NVML unavailable"}
        seconds = (self.ended or self.clock()) - self.began
        count = len(self.readings)
        summary = {"readings": count, "seconds": seconds, "hz": count / seconds if seconds > 0 else None}
        for key in GPU_SAMPLED:
            values = [r[key] for r in self.readings if isinstance(r.get(key), int | float)]
            if values:
                summary[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        reasons: dict[str, int] = {}
        for reading in self.readings:
            for reason in reading.get("reasons") or []:
                reasons[reason] = reasons.get(reason, 0) + 1
        summary["reasons"] = {reason: seen / count for reason, seen in sorted(reasons.items())}
        errors = sorted({e for r in self.readings for e in r.get("errors", [])})
        if errors:
            summary["errors"] = errors
        return summary


def sampled_state(blocks: list[dict], *, uuid: str) -> dict:
    """A job's `gpu_state` from its blocks' sampler summaries: each block's ranges in block order,
    and the slow-down reasons seen in any reading while timing. Nothing is read before setup or
    after the pass: such a pair showed the state another job left, not this one's."""
    sampled = [block.get("gpu") or {} for block in blocks]
    seen = {reason for state in sampled for reason in (state.get("reasons") or {})}
    return {
        "uuid": uuid,
        "sampled_hz": SAMPLER_HZ,
        "blocks": sampled,
        "throttled": sorted(seen & SLOWDOWNS),
    }


def _reasons(nvml, handle) -> list[str]:
    read = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    mask = read(handle)
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def throttled(*states: dict) -> list[str]:
    """The slow-down reasons present in any of the readings."""
    return sorted(
        {reason for state in states for reason in (state.get("reasons") or []) if reason in SLOWDOWNS}
    )


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
