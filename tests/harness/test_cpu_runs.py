"""Small workloads run for real on the CPU through the upstream setup functions."""

import statistics

import pytest
from django.conf import settings

from registry.reruns.harness import run_job_spec
from tests.harness.conftest import geglu_spec

pytestmark = pytest.mark.usefixtures("harness_root")


class TestPlainPyTorchProvidersRunOnTheCpu:
    @pytest.mark.parametrize("mode", ["forward", "backward", "full"])
    def test_geglu_huggingface_gives_upstream_figures_and_raw_samples(self, mode):
        result = run_job_spec(geglu_spec(operation_mode=mode), timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert result["unit"] == "ms"
        assert 0 < result["p20"] <= result["median"] <= result["p80"] < 1000
        assert len(result["samples"]) >= 20
        assert all(sample > 0 for sample in result["samples"])
        assert statistics.median(result["samples"]) < 1000
        assert result["error"] == ""

    def test_the_environment_and_protocol_say_cpu_wall_clock(self):
        result = run_job_spec(geglu_spec(), timeout_s=120)

        assert result["status"] == "ok", result["error"]
        environment = result["environment"]
        assert environment["gpu_slug"] == "cpu"
        assert environment["liger_kernel"] == "0.8.5"
        assert environment["torch"].startswith("2.")
        assert environment["transformers"]
        assert environment["python"].count(".") == 2
        assert environment["host"]
        protocol = result["protocol"]
        assert protocol["comparabilityFamily"] == "kernelindex/cpu-v1"
        assert protocol["name"] == "kernelindex-cpu-v1"
        assert protocol["statistic"] == "median"
        assert "perf_counter" in protocol["timer"]
        sampling = result["sampling"]
        assert sampling["protocol"] == "kernelindex-cpu-v1"
        assert sampling["stop"] in ("precision", "budget")
        assert len(result["samples"]) >= min(30, len(result["samples"])) > 0
        assert result["upstream"]["p20"] <= result["upstream"]["median"] <= result["upstream"]["p80"]

    def test_rms_norm_from_the_bundled_data_layout_runs(self):
        """The bundled rms_norm rows sweep H over M rows; 0.8.5 takes x as rows."""
        spec = geglu_spec(
            kernel="rms_norm",
            x_name="H",
            x_value=256,
            config={"M": 64, "eps": 1e-6, "dtype": "torch.float32"},
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert result["median"] > 0
        assert len(result["samples"]) >= 20

    def test_cross_entropy_torch_from_the_bundled_data_layout_runs(self):
        spec = geglu_spec(
            kernel="cross_entropy",
            provider="torch",
            operation_mode="full",
            x_name="V",
            x_value=512,
            config={"B": 2, "T": 16},
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert result["median"] > 0

    def test_a_script_with_its_own_bench_function_runs(self):
        spec = geglu_spec(
            kernel="tiled_swiglu",
            x_value=32,
            config={
                "bsz": 1,
                "hidden_size": 64,
                "intermediate_size": 128,
                "hidden_act": "silu",
                "activation_type": "swiglu",
                "num_shards": 2,
                "dtype": "torch.float32",
            },
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert len(result["samples"]) >= 20


class TestTheLossesRunOnTheCpu:
    """The fused-linear and chunked losses' plain-PyTorch references, from the bundled data's
    layout (H and V, not hidden_size and vocab_size), at small sizes."""

    def test_orpo_huggingface_full_pass(self):
        spec = geglu_spec(
            kernel="fused_linear_orpo_loss",
            operation_mode="full",
            x_name="B",
            x_value=2,
            config={"T": 16, "H": 32, "V": 256, "mode": "forward", "dtype": "torch.float32"},
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert 0 < result["p20"] <= result["median"] <= result["p80"]
        assert len(result["samples"]) >= 20

    def test_grpo_torch_backward_pass_at_sequence_level(self):
        spec = geglu_spec(
            kernel="fused_linear_grpo_loss_sequence",
            provider="torch",
            operation_mode="backward",
            x_name="B",
            x_value=2,
            config={
                "T": 16,
                "H": 32,
                "V": 256,
                "importance_sampling_level": "sequence",
                "dtype": "torch.float32",
            },
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert len(result["samples"]) >= 20

    def test_distillation_jsd_torch_forward_pass(self):
        spec = geglu_spec(
            kernel="distill_jsd_loss",
            provider="torch",
            x_name="BT",
            x_value=64,
            config={
                "H": 32,
                "V": 256,
                "mode": "forward",
                "dtype": "torch.float32",
                "bias": False,
                "weight_hard_loss": 0.5,
                "weight_soft_loss": 0.5,
                "ignore_index": -100,
            },
        )

        result = run_job_spec(spec, timeout_s=120)

        assert result["status"] == "ok", result["error"] + result["log"][-2000:]
        assert result["median"] > 0


# A stand-in for benchmark_megatron_cross_entropy.py with its per-rank functions' signatures: the
# real one times with CUDA events and runs a Triton kernel, so it cannot run on a CPU. Each rank
# holds V/TP ones; the all-reduce of their sums gives V only if every rank took part.
TP_STAND_IN = """
import time

import torch
import torch.distributed as dist


def _timed_loop(fn, tp_group, n_iters):
    dist.barrier(group=tp_group)
    began = time.perf_counter()
    for _ in range(n_iters):
        fn()
    return (time.perf_counter() - began) * 1000 / n_iters


def _bench_speed_one(provider, mode, s, b, v_global, tp_size, tp_group, device):
    assert dist.get_world_size(tp_group) == tp_size
    if provider == "broken" and dist.get_rank() == 1:
        raise RuntimeError("rank 1 breaks")
    logits = torch.ones(s, b, v_global // tp_size)

    def step():
        total = logits.sum(dim=-1)
        dist.all_reduce(total, group=tp_group)
        assert bool(torch.all(total == v_global)), total

    samples = torch.tensor([_timed_loop(step, tp_group, 5) for _ in range(5)])
    return tuple(float(samples.quantile(q)) for q in (0.5, 0.2, 0.8))
"""


@pytest.fixture
def tp_stand_in(tmp_path):
    scripts = tmp_path / "benchmark" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "benchmark_megatron_cross_entropy.py").write_text(TP_STAND_IN)
    return tmp_path


def tp_plan(tp, **changes):
    from registry.reruns.harness.spec import plan_for

    spec = {
        "kernel": "megatron_cross_entropy",
        "provider": "liger",
        "operation_mode": "full",
        "metric": "latency",
        "x_name": "V",
        "x_value": 256,
        "config": {"S": 4, "B": 2, "TP": tp},
        "device": "cuda",
    }
    # The plan as spec.py makes it, on the CPU with gloo (spec.py keeps the liger provider off a
    # CPU), with a small sampling budget.
    protocol = {**settings.CONTROLLED_TIMING, "budget_s": 0.05, "min_samples": 5, "max_samples": 50}
    return {**plan_for(spec), "device": "cpu", "protocol": protocol, **changes}


class TestTensorParallelRanksOnTheCpu:
    def test_two_ranks_join_one_gloo_group_and_rank_0_reports(self, tp_stand_in):
        from registry.reruns.harness.distributed import measure

        result = measure(tp_stand_in, tp_plan(2))

        assert result["status"] == "ok"
        assert result["unit"] == "ms"
        assert 0 < result["p20"] <= result["median"] <= result["p80"]
        assert 0 < result["upstream"]["p20"] <= result["upstream"]["median"] <= result["upstream"]["p80"]
        measured = result["measured"]
        assert measured["world_size"] == 2
        assert [rank["rank"] for rank in measured["ranks"]] == [0, 1]
        assert len(measured["loop_samples_ms"]) == 5
        assert (measured["stop"], measured["protocol"]) == ("count", "kernelindex-lockstep-ranks")
        assert 5 <= len(result["samples"]) <= 50

    def test_a_failing_rank_ends_the_run_and_says_which(self, tp_stand_in):
        from registry.reruns.harness.distributed import RankFailed, measure

        with pytest.raises(RankFailed, match="rank 1 of 2 failed first: RuntimeError: rank 1 breaks"):
            measure(tp_stand_in, tp_plan(2, provider="broken"))
