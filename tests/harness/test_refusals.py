"""Specs the harness cannot run as they stand are refused with the reason, before any process starts."""

import pytest

from registry.reruns.harness import run_job_spec
from registry.reruns.harness.spec import plan_for
from tests.harness.conftest import geglu_spec


def refusal(spec):
    result = run_job_spec(spec, timeout_s=5)
    assert result["status"] == "refused"
    assert result["median"] is None
    assert result["samples"] == []
    return result["error"]


def megatron_spec(**changes):
    spec = {
        "kernel": "megatron_cross_entropy",
        "provider": "liger",
        "operation_mode": "full",
        "metric": "latency",
        "x_name": "V",
        "x_value": 4096,
        "config": {"S": 2048, "B": 4, "TP": 1},
        "device": "cuda",
    }
    return {**spec, **changes}


def kto_spec(**changes):
    config = {"T": 512, "H": 1024, "V": 128256, "mode": "forward", "dtype": "torch.bfloat16", "bias": True}
    spec = {
        "kernel": "kto_loss",
        "provider": "liger",
        "operation_mode": "full",
        "metric": "latency",
        "x_name": "B",
        "x_value": 2,
        "config": {**config, "beta": 0.1, "ignore_index": 42},
        "device": "cuda",
    }
    return {**spec, **changes}


class TestUnmappedKernelsAreRefused:
    def test_a_kernel_without_a_mapping_is_refused(self):
        assert "'fused_linear_simpo_loss' is not mapped" in refusal(
            geglu_spec(kernel="fused_linear_simpo_loss")
        )

    def test_a_kernel_nobody_mapped_is_refused(self):
        assert "no mapping" in refusal(geglu_spec(kernel="flash_attention"))

    def test_simpo_says_why_for_each_provider(self):
        why = refusal(geglu_spec(kernel="fused_linear_simpo_loss", provider="liger"))
        assert "compute_nll_loss=True" in why
        assert "loss_type 'sigmoid'" in why

    def test_kto_speed_says_why_and_its_memory_maps(self):
        spec = kto_spec(metric="latency")
        assert "use_ref_bias" in refusal(spec)
        assert plan_for(kto_spec(metric="memory"))["function"] == "setup_kto_loss"

    @pytest.mark.parametrize("provider", ["megatron-fused", "megatron-unfused"])
    def test_megatron_cross_entropy_without_megatron_core_says_why(self, provider):
        assert "megatron-core" in refusal(megatron_spec(provider=provider))

    @pytest.mark.parametrize("mode", ["forward", "backward"])
    def test_megatron_cross_entropy_memory_is_of_a_full_pass_only(self, mode):
        assert "full forward and backward" in refusal(megatron_spec(metric="memory", operation_mode=mode))

    @pytest.mark.parametrize(
        "tp, x_value, why",
        [
            (3, 4096, "split evenly"),
            (16, 4096, "from 1 to 8"),
            (0, 4096, "from 1 to 8"),
            (1.5, 4096, "whole"),
        ],
    )
    def test_megatron_cross_entropy_ranks_must_split_the_vocabulary(self, tp, x_value, why):
        spec = megatron_spec(x_value=x_value)
        spec["config"]["TP"] = tp
        assert why in refusal(spec)

    def test_megatron_cross_entropy_on_two_ranks_is_a_two_process_plan(self):
        spec = megatron_spec(x_value=131072)
        spec["config"]["TP"] = 2
        plan = plan_for(spec)
        assert (plan["entry"], plan["world_size"], plan["function"]) == ("distributed", 2, "_bench_speed_one")

    def test_megatron_cross_entropy_needs_a_gpu(self):
        assert "needs a CUDA GPU" in refusal(megatron_spec(device="cpu"))

    def test_a_provider_the_script_does_not_offer_is_refused(self):
        assert "provider 'megatron'" in refusal(geglu_spec(provider="megatron"))

    def test_a_triton_provider_on_the_cpu_is_refused(self):
        assert "needs a CUDA GPU" in refusal(geglu_spec(provider="liger"))

    def test_peak_memory_on_the_cpu_is_refused(self):
        assert "CUDA allocator" in refusal(geglu_spec(metric="memory", operation_mode="full"))

    def test_a_workload_missing_a_parameter_the_script_reads_is_refused(self):
        spec = geglu_spec()
        del spec["config"]["intermediate_size"]
        assert "lacks intermediate_size" in refusal(spec)


class TestBadParametersAreRefused:
    @pytest.mark.parametrize("x_value", ["llama_3_8b", -8, 0, True, None, float("nan"), 2**50])
    def test_x_value_must_be_a_positive_number(self, x_value):
        assert "x_value" in refusal(geglu_spec(x_value=x_value))

    @pytest.mark.parametrize("field", ["operation_mode", "metric", "device"])
    def test_choices_must_be_known(self, field):
        assert field in refusal(geglu_spec(**{field: "everything"}))

    @pytest.mark.parametrize("kernel", ["../../etc/passwd", "geglu; rm -rf /", "", 7])
    def test_names_are_plain(self, kernel):
        assert "kernel must be a name" in refusal(geglu_spec(kernel=kernel))

    def test_an_unknown_dtype_is_refused(self):
        spec = geglu_spec()
        spec["config"]["dtype"] = "torch.complex64"
        assert "dtype" in refusal(spec)

    @pytest.mark.parametrize("value", [{"nested": 1}, [1, 2], "$(reboot)", float("inf")])
    def test_config_values_are_plain_data(self, value):
        spec = geglu_spec()
        spec["config"]["hidden_act"] = value
        assert "hidden_act" in refusal(spec)

    def test_config_must_be_an_object(self):
        assert "config must be" in refusal(geglu_spec(config="bsz=8"))

    def test_a_spec_must_be_an_object(self):
        assert "JSON object" in refusal(["geglu"])

    def test_config_disagreeing_with_x_is_refused(self):
        spec = geglu_spec()
        spec["config"]["T"] = 128
        assert "disagrees" in refusal(spec)
