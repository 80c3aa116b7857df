"""Each kernel's formula (Liger's speed-of-light count, registry/sources/liger/work.py) against a
count done by hand for one workload of the bundled data.

The hand counts are written out here as the tensors they come from (shapes after
liger-kernel 0.8.5's benchmark/scripts/benchmark_<kernel>.py), not by calling the module's
helpers: s is the dtype's bytes, an int64 index is 8 bytes."""

from types import SimpleNamespace

import pytest

from registry import speed_of_light
from registry.sources.liger.work import BACKWARD_IN_FORWARD, WORK, count

BF16, FP32 = 2, 4
# Reference workload: x [8, 8192, 4096], w_gate and w_up [11008, 4096], w_down [4096, 11008].
N, H, INTER = 8 * 8192, 4096, 11008
# GeGLU backward: read x, the three weights and dy; write dx and the three weights' gradients.
GEGLU_BACKWARD_BYTES = (N * H + 3 * H * INTER + N * H + N * H + 3 * H * INTER) * BF16
# Forward: three GEMMs of 2·N·H·I; backward: each GEMM's input gradient and weight gradient.
GEGLU_BACKWARD_FLOPS = 3 * 2 * (2 * N * H * INTER)
TILED = {"bsz": 2, "T": 1024, "hidden_size": 2048, "intermediate_size": 4096}
TN, TH, TI = 2 * 1024, 2048, 4096
V = 128256

CASES = [
    # kernel, parameters, dtype, pass, bytes, FLOPs
    (
        "geglu",
        {"bsz": 8, "T": 8192, "hidden_size": H, "intermediate_size": INTER},
        "bf16",
        "backward",
        GEGLU_BACKWARD_BYTES,
        GEGLU_BACKWARD_FLOPS,
    ),
    (
        "swiglu",
        {"B": 4, "T": 2048, "hidden_size": 4096, "intermediate_size": 11008},
        "bf16",
        "forward",
        # x [4·2048, 4096] and three weights in, y out
        (8192 * 4096 + 3 * 4096 * 11008 + 8192 * 4096) * BF16,
        3 * 2 * 8192 * 4096 * 11008,
    ),
    (
        "tiled_geglu",
        TILED,
        "bf16",
        "full",
        # x, weights, dy read; y, dx, dweights written
        (TN * TH + 3 * TH * TI + TN * TH + TN * TH + TN * TH + 3 * TH * TI) * BF16,
        (6 + 12) * TN * TH * TI,
    ),
    ("tiled_swiglu", TILED, "bf16", "backward", (3 * TN * TH + 6 * TH * TI) * BF16, 12 * TN * TH * TI),
    # x [2048, 4096] and weight [4096] in, y out; x², the mean, the scale and the weight: 4 per element
    (
        "rms_norm",
        {"M": 2048, "H": 4096},
        "bf16",
        "forward",
        (2048 * 4096 + 4096 + 2048 * 4096) * BF16,
        4 * 2048 * 4096,
    ),
    (
        "layer_norm",
        {"M": 4096, "N": 1024},
        "fp32",
        "backward",
        # x, weight, bias, dy read; dx, dweight, dbias written
        (4096 * 1024 + 2 * 1024 + 4096 * 1024 + 4096 * 1024 + 2 * 1024) * FP32,
        8 * 4096 * 1024,
    ),
    ("softmax", {"M": 2048, "N": 4096}, "bf16", "full", 4 * 2048 * 4096 * BF16, 6 * 2048 * 4096),
    ("relu_squared", {"M": 4096, "N": 1024}, "bf16", "forward", 2 * 4096 * 1024 * BF16, 2 * 4096 * 1024),
    ("sparsemax", {"B": 4, "T": 512, "V": 1024}, "fp32", "forward", 2 * 2048 * 1024 * FP32, 3 * 2048 * 1024),
    (
        "fused_add_rms_norm",
        {"M": 2048, "H": 4096},
        "fp32",
        "backward",
        # dy, d(residual out), x + residual and the weight read; dx, dresidual, dweight written
        (3 * 2048 * 4096 + 4096 + 2 * 2048 * 4096 + 4096) * FP32,
        6 * 2048 * 4096,
    ),
    (
        "group_norm",
        {"M": 128, "C": 64, "H": 512},
        "fp32",
        "forward",
        (2 * 128 * 64 * 512 + 2 * 64) * FP32,
        4 * 128 * 64 * 512,
    ),
    (
        "megatron_rms_norm",
        {"B": 1, "S": 4096, "H": 4096},
        "",
        "full",
        # bf16 x [4096, 1, 4096] and weight in; y out; dy in; dx and dweight out
        (4096 * 4096 + 4096 + 2 * 4096 * 4096 + 4096 * 4096 + 4096) * BF16,
        (4 + 6) * 4096 * 4096,
    ),
    (
        "megatron_swiglu",
        {"B": 4, "S": 2048, "ffn_local": 8192},
        "",
        "forward",
        (2048 * 4 * 2 * 8192 + 2048 * 4 * 8192) * BF16,
        4 * 2048 * 4 * 8192,
    ),
    (
        "cross_entropy",
        {"B": 8, "T": 2048, "V": 32000},
        "",
        "forward",
        # fp32 logits [16384, 32000] and int64 targets in, a scalar loss out
        16384 * 32000 * FP32 + 16384 * 8 + FP32,
        3 * 16384 * 32000,
    ),
    (
        "megatron_cross_entropy",
        {"B": 4, "S": 2048, "V": 65536, "TP": 1},
        "",
        "full",
        # bf16 logits and targets in, loss out and its gradient in, the logits' gradient out
        8192 * 65536 * BF16 + 8192 * 8 + 2 * BF16 + 8192 * 65536 * BF16,
        (3 + 1) * 8192 * 65536,
    ),
    (
        "kl_div",
        {"B": 8, "T": 2048, "V": 131072},
        "",
        "forward",
        2 * 16384 * 131072 * FP32 + FP32,
        3 * 16384 * 131072,
    ),
    (
        "jsd",
        {"bsz": 1, "seq_len": 8192, "vocab_size": V, "BT": 4096},
        "",
        "full",
        (2 * 4096 * V + 4096 * V) * FP32 + 2 * FP32,
        5 * 4096 * V,
    ),
    (
        "tvd",
        {"B": 8, "T": 2048, "V": 32768},
        "",
        "forward",
        2 * 16384 * 32768 * FP32 + FP32,
        3 * 16384 * 32768,
    ),
    (
        "embedding",
        {"B": 8, "T": 2048, "V": 1024, "D": 4096},
        "fp32",
        "backward",
        # indices and dy [16384, 4096] in; the whole [1024, 4096] gradient out
        16384 * 8 + 16384 * 4096 * FP32 + 1024 * 4096 * FP32,
        16384 * 4096,
    ),
    (
        "rope",
        {"hidden_size": 8192, "num_q_heads": 32, "num_kv_heads": 8, "T": 2048},
        "bf16",
        "forward",
        # q [1, 2048, 32, 256] and k [1, 2048, 8, 256] in and out, cos and sin [1, 2048, 256] in
        (2 * 2048 * 40 * 256 + 2 * 2048 * 256) * BF16,
        3 * 2048 * 40 * 256,
    ),
    (
        "llama4_rope",
        {"H": 8192, "num_q_heads": 32, "num_kv_heads": 8, "seq_len": 2048},
        "bf16",
        "backward",
        # dq and dk in, cos and sin in, the gradients out: q and k themselves are not needed
        (2 * 2048 * 40 * 256 + 2 * 2048 * 256) * BF16,
        3 * 2048 * 40 * 256,
    ),
    (
        "fused_moe",
        {"T": 8192, "H": 2048, "E": 128, "K": 8, "intermediate_dim": 768},
        "bf16",
        "forward",
        # x and y [8192, 2048]; 128 experts' gate-up [1536, 2048] and down [2048, 768]; fp32 logits [8192, 128]
        (2 * 8192 * 2048 + 128 * (2 * 768 * 2048 + 2048 * 768)) * BF16 + 8192 * 128 * FP32,
        8192 * 8 * (2 * 2048 * 1536 + 2 * 768 * 2048),
    ),
    (
        "fused_neighborhood_attention",
        {"batch_size": 2, "seq_len": 1024, "hidden_size": 1024, "kernel_size": 9, "num_heads": 16},
        "fp32",
        "forward",
        # x and y [2, 1024, 1024]; q, k, v and out projections [1024, 1024] with biases
        (2 * 2 * 1024 * 1024 + 4 * (1024 * 1024 + 1024)) * FP32,
        4 * 2 * (2 * 1024 * 1024 * 1024) + 2 * (2 * 2 * 1024 * 9 * 1024),
    ),
    (
        "multi_token_attention",
        {"B": 2, "C_in": 4, "C_out": 4, "K": 3, "L": 1024, "groups": 1},
        "bf16",
        "forward",
        (2 * 4 * 1024 * 1024 + 4 * 4 * 3 * 3 + 4 + 2 * 4 * 1024 * 1024) * BF16,
        2 * (2 * 4 * 1024 * 1024) * 4 * 3 * 3,
    ),
    (
        "sparse_multi_token_attention",
        {"B": 2, "C_in": 4, "C_out": 4, "K": 3, "L": 512, "groups": 1},
        "fp32",
        "full",
        # x and kernel in; y out; dy in; dx and dkernel out
        (2 * (2 * 4 * 512 * 512 + 4 * 4 * 9 + 4) + 2 * (2 * 4 * 512 * 512)) * FP32,
        3 * 2 * (2 * 4 * 512 * 512) * 4 * 9,
    ),
    (
        "fused_linear_cross_entropy",
        {"BT": 4096, "H": 4096, "V": V},
        "bf16",
        "forward",
        (4096 * 4096 + V * 4096) * BF16 + 4096 * 8 + BF16,
        2 * 4096 * 4096 * V,
    ),
    (
        "fused_linear_jsd",
        {"BT": 1024, "H": 4096, "V": V},
        "bf16",
        "full",
        # student and teacher inputs and heads, labels; loss and its gradient; the student's gradients
        2 * (1024 * 4096 + V * 4096) * BF16 + 1024 * 8 + 2 * BF16 + (1024 * 4096 + V * 4096) * BF16,
        2 * (2 * 1024 * 4096 * V) + 4 * 1024 * 4096 * V,
    ),
    (
        "fused_linear_cpo_loss",
        {"B": 8, "T": 1024, "H": 4096, "V": V},
        "bf16",
        "forward",
        (8192 * 4096 + V * 4096) * BF16 + 8192 * 8 + BF16,
        2 * 8192 * 4096 * V,
    ),
    (
        "fused_linear_orpo_loss",
        {"B": 4, "T": 1024, "H": 4096, "V": V},
        "bf16",
        "full",
        2 * (4096 * 4096 + V * 4096) * BF16 + 4096 * 8 + 2 * BF16,
        (2 + 4) * 4096 * 4096 * V,
    ),
    (
        "fused_linear_simpo_loss",
        {"B": 2, "T": 1024, "H": 4096, "V": V},
        "bf16",
        "forward",
        (2048 * 4096 + V * 4096) * BF16 + 2048 * 8 + BF16,
        2 * 2048 * 4096 * V,
    ),
    (
        "kto_loss",
        {"B": 4, "T": 512, "H": 1024, "V": V},
        "bf16",
        "forward",
        # policy and reference inputs [4, 512, 1024] and heads [V, 1024], targets
        2 * (2048 * 1024 + V * 1024) * BF16 + 2048 * 8 + BF16,
        2 * (2 * 2048 * 1024 * V),
    ),
    (
        "fused_linear_grpo_loss_sequence",
        {"B": 4, "T": 1024, "H": 4096, "V": V},
        "bf16",
        "forward",
        2 * (4096 * 4096 + V * 4096) * BF16 + 4096 * 8 + BF16,
        2 * (2 * 4096 * 4096 * V),
    ),
    (
        "fused_linear_grpo_loss_token",
        {"B": 2, "T": 1024, "H": 4096, "V": V},
        "bf16",
        "full",
        2 * (2048 * 4096 + V * 4096) * BF16 + 2048 * 8 + 2 * BF16 + (2048 * 4096 + V * 4096) * BF16,
        2 * (2 * 2048 * 4096 * V) + 4 * 2048 * 4096 * V,
    ),
    (
        "distill_jsd_loss",
        {"BT": 1024, "H": 4096, "V": V},
        "bf16",
        "forward",
        # student [1024, 2048] with head [V, 2048]; teacher [1024, 4096] with head [V, 4096]
        (1024 * 2048 + V * 2048 + 1024 * 4096 + V * 4096) * BF16 + 1024 * 8 + BF16,
        2 * 1024 * V * (2048 + 4096),
    ),
    (
        "distill_cosine_loss",
        {"BT": 2048, "H": 4096, "V": V},
        "bf16",
        "full",
        (2048 * 2048 + V * 2048 + 2048 * 4096 + V * 4096) * BF16
        + 2048 * 8
        + 2 * BF16
        + (2048 * 2048 + V * 2048) * BF16,
        2 * 2048 * V * (2048 + 4096) + 4 * 2048 * 2048 * V,
    ),
]


class TestEachKernelAgainstAHandCount:
    def test_every_kernel_of_the_bundled_data_has_a_case(self):
        assert {case[0] for case in CASES} == set(WORK)

    @pytest.mark.parametrize(
        ("kernel", "parameters", "dtype", "mode", "expected_bytes", "expected_flops"),
        CASES,
        ids=[c[0] for c in CASES],
    )
    def test_the_formula_matches_the_hand_count(
        self, kernel, parameters, dtype, mode, expected_bytes, expected_flops
    ):
        counted = count(kernel, parameters, dtype, mode)
        assert (counted["bytes"], counted["flops"]) == (expected_bytes, expected_flops)

    def test_the_reference_geglu_backward_is_35_46_teraflop(self):
        counted = count(
            "geglu", {"bsz": 8, "T": 8192, "hidden_size": H, "intermediate_size": INTER}, "bf16", "backward"
        )
        assert counted["flops"] == 35_459_249_995_776
        assert counted["bytes"] == 2_151_677_952


class TestWhatIsNotCounted:
    @pytest.mark.parametrize(
        "kernel", ["tvd", "fused_linear_cross_entropy", "kto_loss", "megatron_cross_entropy"]
    )
    def test_a_loss_kernels_backward_alone_says_why(self, kernel):
        parameters = {"B": 4, "T": 512, "BT": 2048, "H": 1024, "V": 4096, "S": 512, "TP": 1}
        assert count(kernel, parameters, "bf16", "backward") == {"reason": BACKWARD_IN_FORWARD}

    def test_a_kernel_without_a_formula_is_left_to_the_other_sources_and_then_says_so(self, db):
        assert count("attn_res", {"T": 1}, "bf16", "forward") is None
        workload = SimpleNamespace(parameters={"T": 1}, dtype="bf16", tensors=[], spec={})
        sol = speed_of_light.verdict(
            kernel="attn_res",
            workload=workload,
            operation_mode="forward",
            metric="latency",
            median=1.0,
            gpu_slug="nvidia-h200",
        )
        assert sol == {"countable": False, "reason": "no formula for attn_res: its work is not counted"}

    def test_a_workload_missing_a_shape_says_which(self):
        assert count("geglu", {"bsz": 8, "hidden_size": 64}, "bf16", "forward") == {
            "reason": "the workload does not give T, which the count needs"
        }

    def test_a_model_name_sweep_is_not_counted(self):
        parameters = {"model_config": "llama_2_7b", "bsz": 8, "hidden_size": 64, "intermediate_size": 128}
        assert "reason" in count("geglu", parameters, "bf16", "forward")
