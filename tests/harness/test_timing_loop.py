"""KernelIndex's timing loop on the CPU (harness/timing.py): what it reports when the time budget
ends the sampling before any interval of the median exists."""

import json
import time

import torch
from django.conf import settings

from registry.reruns.harness import stats, timing


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


def test_what_is_timed_runs_without_the_default_device_the_setup_ran_under():
    import importlib.util

    from registry.reruns.harness import runner as runner_path  # noqa: F401 - the module's file

    spec = importlib.util.spec_from_file_location("harness_runner", runner_path.__file__)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
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
