"""Specs the harness cannot run as they stand are refused with the reason, before any process starts."""

import pytest

from registry.reruns.harness import run_job_spec
from tests.harness.conftest import geglu_spec


def refusal(spec):
    result = run_job_spec(spec, timeout_s=5)
    assert result["status"] == "refused"
    assert result["median"] is None
    assert result["samples"] == []
    return result["error"]


class TestUnmappedKernelsAreRefused:
    def test_a_kernel_without_a_mapping_is_refused(self):
        assert "'fused_linear_orpo_loss' is not mapped" in refusal(
            geglu_spec(kernel="fused_linear_orpo_loss")
        )

    def test_megatron_cross_entropy_says_why(self):
        assert "torch.distributed" in refusal(geglu_spec(kernel="megatron_cross_entropy"))

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
