"""A latency measurement samples in three or more independent blocks: upstream's setup runs again
for each (fresh inputs), the allocator's cache is emptied between them, each warms up again, and
every sample keeps its block id. Run for real on the CPU protocol, through the harness's child
process, and in-process through runner.run with a stand-in benchmark script that records what
each block's setup built."""

import math
import sys
import types
from dataclasses import dataclass

import pytest
import torch
from django.conf import settings

from registry.reruns.harness import run_job_spec, timing
from registry.stats import medians as stats
from tests.harness.conftest import geglu_spec
from tests.harness.test_timing_loop import harness_runner


class TestOnTheCpuProtocol:
    pytestmark = pytest.mark.usefixtures("harness_root")

    def test_a_cpu_job_samples_in_three_blocks_each_re_warmed(self):
        result = run_job_spec(geglu_spec(), timeout_s=180)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        sampling = result["sampling"]
        blocks = sampling["blocks"]
        assert len(blocks) == settings.CONTROLLED_TIMING["blocks"] >= timing.MIN_BLOCKS
        ids = sampling["sample_blocks"]
        assert len(ids) == len(result["samples"])
        assert ids == sorted(ids) and set(ids) == set(range(len(blocks)))
        assert [ids.count(number) for number in range(len(blocks))] == [block["samples"] for block in blocks]
        for block in blocks:
            assert block["warmup_calls"] >= settings.CONTROLLED_TIMING["warmup_calls"]
            assert block["setup_s"] >= 0 and block["timing_s"] > 0
            assert block["stop"] in ("precision", "budget")
        assert sampling["warmup_calls"] == sum(block["warmup_calls"] for block in blocks)
        assert result["protocol"]["stopping"]["blocks"] == len(blocks)
        assert result["gpu_state"] == {}  # no card, nothing read


@dataclass
class Output:
    y_20: float
    y_50: float
    y_80: float


def stand_in_script(recorder, built: list):
    """A benchmark script as upstream writes one: its function builds the inputs, then hands a
    callable to do_bench (the recorder, as runner.start patches triton.testing.do_bench)."""
    module = types.ModuleType("kernelindex_stand_in_bench")

    def bench(run_input):
        x = torch.randn(64, 64)
        built.append(x)

        def fn():
            return x @ x

        y = recorder.timed(fn, quantiles=[0.5, 0.2, 0.8])
        return Output(y_20=y[1], y_50=y[0], y_80=y[2])

    module.bench = bench
    return module


def in_process(monkeypatch, nvml=None, **protocol):
    runner = harness_runner()
    calls = []

    def do_bench(fn, quantiles=None):
        calls.append(fn)
        fn()
        return [1.0, 0.9, 1.1]

    recorder = runner.Recorder(do_bench, torch=torch, device="cpu", timing=timing, stats=stats)
    built = []
    module = stand_in_script(recorder, built)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    utils = types.SimpleNamespace(SingleBenchmarkRunInput=lambda **fields: types.SimpleNamespace(**fields))
    state = {"torch": torch, "utils": utils, "recorder": recorder, "nvml": nvml, "environment": {}}
    plan = {
        "entry": "function",
        "script": module.__name__,
        "function": "bench",
        "config": {},
        "x_value": 1,
        "provider": "torch",
        "operation_mode": "forward",
        "metric": "latency",
        "device": "cpu",
        "protocol": {
            **settings.CONTROLLED_TIMING,
            "warmup_ms": 0,
            "warmup_calls": 2,
            "budget_s": 0.3,
            "min_samples": 12,
            **protocol,
        },
    }
    return runner.run(state, plan), built, calls


class TestBlocksInProcess:
    def test_each_block_builds_its_own_inputs_and_upstream_times_once(self, monkeypatch):
        result, built, upstream_calls = in_process(monkeypatch, blocks=4)

        assert len(built) == 4  # upstream's setup ran once per block: fresh inputs
        assert len({tensor.data_ptr() for tensor in built}) == 4
        assert len(upstream_calls) == 1  # upstream's own timer ran in the first block only
        assert result["upstream"] == {"median": 1.0, "p20": 0.9, "p80": 1.1}
        measured = result["measured"]
        assert len(measured["blocks"]) == 4
        assert measured["sample_blocks"] == [
            number for number, block in enumerate(measured["blocks"]) for _ in range(block["samples"])
        ]
        assert len(result["samples"]) == len(measured["sample_blocks"])
        # Each block's share of the protocol: a quarter of the least samples, the budget split.
        assert all(block["samples"] >= math.ceil(12 / 4) for block in measured["blocks"])
        assert sum(block["timing_s"] for block in measured["blocks"]) == pytest.approx(measured["timing_s"])

    def test_fewer_than_three_blocks_asked_for_still_gives_three(self, monkeypatch):
        result, built, _ = in_process(monkeypatch, blocks=1)

        assert len(built) == len(result["measured"]["blocks"]) == timing.MIN_BLOCKS == 3


class TestBlockSettings:
    def test_a_block_gets_its_share_and_a_wider_precision_target(self):
        base = {**settings.CONTROLLED_TIMING, "budget_s": 3.0, "min_samples": 30, "precision": 0.005}

        block = timing.block_settings(base, 3)

        assert block["budget_s"] == pytest.approx(1.0)
        assert block["min_samples"] == 10
        assert block["precision"] == pytest.approx(0.005 * math.sqrt(3))
