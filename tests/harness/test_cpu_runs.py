"""Small workloads run for real on the CPU through the upstream setup functions."""

import statistics

import pytest

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
        assert protocol["comparabilityFamily"] == "kernelindex/cpu-wall-clock"
        assert protocol["statistic"] == "median"
        assert "perf_counter" in protocol["timer"]

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
