"""KernelIndex's timing loop on the CPU (harness/timing.py): what it reports when the time budget
ends the sampling before any interval of the median exists."""

import json
import time

import torch
from django.conf import settings

from registry.reruns.harness import timing
from registry.stats import medians as stats


def sampled(fn, **overrides):
    return timing.sample(
        torch,
        fn,
        grad_to_none=None,
        settings={**settings.CONTROLLED_TIMING, "warmup_ms": 0, "warmup_calls": 1, **overrides},
        device="cpu",
        precision_of=lambda samples: stats.relative_precision(samples, 0.99),
    )


def test_a_slow_op_that_meets_its_budget_with_a_handful_of_calls_reports_no_precision_as_valid_json():
    # Five calls of 20 ms and a 10 ms budget: no 99% interval of the median exists from 5 samples.
    result = sampled(lambda: time.sleep(0.02), budget_s=0.01, check_every=5)

    assert (len(result["samples"]), result["stop"], result["precision"]) == (5, "budget", None)
    json.dumps(result, allow_nan=False)  # the worker's result, as the recorder stores it


def test_a_budget_stop_past_the_minimum_reports_the_precision_it_reached():
    result = sampled(lambda: time.sleep(0.001), budget_s=0.05, check_every=40, precision=1e-9)

    assert result["stop"] == "budget" and len(result["samples"]) >= 40
    assert result["precision"] == stats.relative_precision(result["samples"], 0.99) > 0


def harness_runner():
    """harness/runner.py as the harness's child process loads it (outside the package)."""
    import importlib.util

    from registry.reruns.harness import runner as runner_path  # noqa: F401 - the module's file

    spec = importlib.util.spec_from_file_location("harness_runner", runner_path.__file__)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner


def test_what_is_timed_runs_without_the_default_device_the_setup_ran_under():
    runner = harness_runner()
    seen = []

    def call():
        seen.append(torch.get_default_device().type)

    def do_bench(fn, warmup=25, rep=100):
        fn()
        return 1.0

    recorder = runner.Recorder(do_bench, torch=torch, device="cpu", timing=timing, stats=stats)
    recorder.settings = {**settings.CONTROLLED_TIMING, "warmup_ms": 0, "warmup_calls": 1, "budget_s": 0.01}
    torch.set_default_device("meta")  # as runner.run leaves it while upstream's setup runs
    try:
        assert torch.empty(1).device.type == "meta"
        recorder.timed(call)
    finally:
        torch.set_default_device(None)

    assert set(seen) == {"cpu"} and len(seen) > 2  # upstream's call and every warm-up call and sample


class Allocator:
    """A stand-in for torch.cuda's peak-memory counters (this machine has no CUDA): each pass
    raises the peak by 1 MiB."""

    def __init__(self):
        self.peak = 100 * 2**20

    def max_memory_allocated(self):
        return self.peak

    def max_memory_reserved(self):
        return self.peak + 2**20


def test_memory_samples_are_the_peaks_upstream_reads_after_each_pass_and_no_other_reading():
    runner = harness_runner()
    allocator = Allocator()

    def upstream_memory(func, _iter=10, quantiles=None):  # utils._test_memory: a read after each pass
        peaks = []
        for _ in range(_iter):
            func()
            peaks.append(allocator.max_memory_allocated() / 2**20)
        return peaks

    passes = []

    def one_pass():  # the first pass reads the allocator itself twice, as torch.compile does
        if not passes:
            allocator.max_memory_allocated(), allocator.max_memory_allocated()
        passes.append(1)
        allocator.peak += 2**20

    def do_bench(fn, warmup=25, rep=100):
        return 1.0

    recorder = runner.Recorder(do_bench, torch=torch, device="cpu", timing=timing, stats=stats)
    recorder.calls, recorder.plan_began = [], time.perf_counter()
    returned = recorder.memory(upstream_memory, allocator)(one_pass)

    (call,) = recorder.calls
    assert call["samples"] == returned == [101.0 + i for i in range(10)]
    assert call["readings_inside_passes_mb"] == [100.0, 100.0]
    assert call["peak_reserved_mb"] == [102.0 + i for i in range(10)]
    assert allocator.max_memory_allocated == Allocator.max_memory_allocated.__get__(allocator)


def test_only_upstreams_benchmark_code_is_timed_under_the_protocol_the_autotuner_gets_do_bench(tmp_path):
    runner = harness_runner()
    scripts = (tmp_path / "benchmark" / "scripts").resolve()
    scripts.mkdir(parents=True)
    upstream_timer = []

    def do_bench(fn, warmup=25, rep=100):
        upstream_timer.append(fn)
        fn()
        return 0.25

    recorder = runner.Recorder(
        do_bench, torch=torch, device="cpu", timing=timing, stats=stats, scripts=scripts
    )
    recorder.settings = {**settings.CONTROLLED_TIMING, "warmup_ms": 0, "warmup_calls": 1, "budget_s": 0.01}
    recorder.calls, recorder.plan_began = [], time.perf_counter()
    # upstream's utils.run_speed_benchmark calls do_bench from a file of benchmark/scripts.
    upstream = {}
    exec(
        compile("def bench(timer, fn):\n    return timer(fn)\n", str(scripts / "utils.py"), "exec"), upstream
    )
    calls = []

    # Triton's autotuner (not upstream's code) timing a candidate config: upstream's timer only.
    assert recorder.timed(lambda: calls.append("candidate")) == 0.25
    assert (calls, recorder.calls, len(upstream_timer)) == (["candidate"], [], 1)

    assert upstream["bench"](recorder.timed, lambda: calls.append("pass")) == 0.25
    (measured,) = recorder.calls
    assert measured["protocol"] == timing.CPU_PROTOCOL and len(measured["samples"]) >= 1
    assert calls.count("pass") > 2  # upstream's call, then the protocol's warm-up and samples


class FakeCuda:
    """The few torch.cuda calls the timing loop makes, on the host's clock: events read
    perf_counter, and the spin blocks the host for as long as the GPU would spin at NOMINAL_HZ.
    No CUDA device exists here; what is checked is the loop's own bookkeeping around them."""

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = time.perf_counter()

        def elapsed_time(self, end):
            return (end.at - self.at) * 1000

    def synchronize(self):
        pass

    def current_device(self):
        return 0

    def get_device_properties(self, index):
        return type("Properties", (), {"L2_cache_size": 1 << 20})()

    def _sleep(self, cycles):
        time.sleep(cycles / timing.NOMINAL_HZ)


class FakeTorch:
    int8 = "int8"
    cuda = FakeCuda()

    @staticmethod
    def empty(size, dtype, device):
        return type("Buffer", (), {"zero_": lambda self: None, "numel": lambda self: size})()


def gpu_sampled(fn):
    return timing.sample(
        FakeTorch,
        fn,
        grad_to_none=None,
        settings={
            **settings.CONTROLLED_TIMING,
            "warmup_ms": 0,
            "warmup_calls": 1,
            "min_samples": 5,
            "check_every": 5,
            "budget_s": 0.01,
        },
        device="cuda",
        precision_of=lambda samples: stats.relative_precision(samples, 0.99),
    )


def test_a_call_the_host_queues_within_its_spin_is_not_host_paced():
    # The warm-up call and the one the spin is sized from take 5 ms to queue (a spin of twice
    # that, 10 ms), the timed ones 0.5 ms: each is covered, with room for a busy machine.
    calls = []

    def call():
        calls.append(None)
        time.sleep(0.005 if len(calls) <= 2 else 0.0005)

    result = gpu_sampled(call)

    assert 10e-3 * timing.NOMINAL_HZ <= result["lead_cycles"] < timing.LEAD_CAP_CYCLES
    assert result["spin_ms"] >= 10.0 > result["host_queue_ms"] >= 0.5
    assert result["host_paced_samples"] == 0 and len(result["samples"]) >= 5


def test_a_call_the_host_takes_longer_to_queue_than_the_capped_spin_is_host_paced():
    # 40 ms to queue a call (a pass that waits for the GPU inside it, say): the spin stops at its
    # 20 ms cap, and every sample's call outlasts it.
    result = gpu_sampled(lambda: time.sleep(0.04))

    assert result["lead_cycles"] == timing.LEAD_CAP_CYCLES
    assert result["host_queue_ms"] > result["spin_ms"] >= 20.0
    assert result["host_paced_samples"] == len(result["samples"]) >= 5
    json.dumps(result, allow_nan=False)
