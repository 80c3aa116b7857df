"""The least bytes and FLOPs of a Liger-Kernel benchmark workload: Liger's speed-of-light count
(the plug-in's `work_counter`; registry/speed_of_light.py turns it into a floor and a verdict).

For each kernel whose work can be counted from its workload, `WORK` holds one formula: the bytes
the forward pass must read (its inputs, each once, at its dtype) and write (its outputs), the
bytes of the gradients the backward pass writes and of what it must read, and the FLOPs of each
pass. From those, per timed pass:

- forward: read the inputs, write the outputs;
- backward: read what the backward needs (the output's gradient and the saved inputs), write the
  gradients;
- full: read the inputs and the output's gradient once, write the outputs and the gradients.

A peak-memory run's floor is the bytes of the forward's inputs (`live_bytes`), which are allocated
before the peak is reset and stay live through the pass.

Counts are lower bounds by construction: where an implementation may legitimately do less (a
gathered row that repeats, an activation kept instead of recomputed) the formula counts the least.
Each formula follows the shapes of liger-kernel 0.8.5's benchmark/scripts/benchmark_<kernel>.py.
No Django here.
"""

from collections.abc import Callable
from dataclasses import dataclass

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}
INDEX = 8  # int64 indices and targets
BACKWARD_IN_FORWARD = (
    "the backward pass alone has no floor: implementations of this loss compute the gradient in the "
    "forward pass (Liger's does), so their backward may only scale it"
)


@dataclass(frozen=True)
class Work:
    """What one workload must move and compute, in bytes and FLOPs."""

    inputs: int  # forward inputs: activations and parameters
    outputs: int  # forward outputs (the loss of a loss kernel)
    grads: int  # gradients the backward writes
    forward_flops: int
    backward_flops: int
    backward_reads: int | None = None  # default: the inputs and the output's gradient
    backward_alone: str = ""  # why the backward pass alone is not counted, if it is not

    def passes(self) -> dict[str, tuple[int, int] | str]:
        """Per timed pass, (bytes, FLOPs), or why the pass is not counted."""
        reads = self.inputs + self.outputs if self.backward_reads is None else self.backward_reads
        forward = (self.inputs + self.outputs, self.forward_flops)
        return {
            "forward": forward,
            "no-grad-forward": forward,
            "backward": self.backward_alone or (reads + self.grads, self.backward_flops),
            "full": (self.inputs + 2 * self.outputs + self.grads, self.forward_flops + self.backward_flops),
        }


def _i(p: dict, *names, default=None) -> int:
    """The first of `names` the workload gives, as an integer."""
    for name in names:
        value = p.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value == int(value):
            return int(value)
    if default is not None:
        return default
    raise KeyError(names[0])


# --- formulas, one per kernel -------------------------------------------------------------------
# Each takes the workload's parameters and the bytes of its dtype, and returns its Work.


def _mlp(p, s, batch: str) -> Work:
    """A gated MLP (Llama's): gate and up projections, the activation, the down projection.
    Forward 3 GEMMs of 2·N·H·I FLOPs; backward 6 (each GEMM's input and weight gradients)."""
    n = _i(p, batch) * _i(p, "T", "seq_len")
    h, inter = _i(p, "hidden_size"), _i(p, "intermediate_size")
    x, weights = n * h * s, 3 * h * inter * s
    return Work(
        inputs=x + weights,
        outputs=x,
        grads=x + weights,
        forward_flops=6 * n * h * inter,
        backward_flops=12 * n * h * inter,
    )


def _rows(p, s, m: str, n: str, *, per_row_params: int = 0, flops: int = 1, bwd_flops: int = 2) -> Work:
    """A row-wise op on an [M, N] tensor with `per_row_params` weight vectors of N (a norm's weight
    and bias): reads x, writes y; backward reads x and dy, writes dx and the weights' gradients."""
    rows, cols = _i(p, *m.split("|")), _i(p, *n.split("|"))
    x, params = rows * cols * s, per_row_params * cols * s
    return Work(
        inputs=x + params,
        outputs=x,
        grads=x + params,
        forward_flops=flops * rows * cols,
        backward_flops=bwd_flops * rows * cols,
    )


def _pair_loss(p, s) -> Work:
    """A divergence of two [BT, V] distributions (KL, JSD, TVD): reads both, writes the loss;
    the gradient is of the input only."""
    bt, v = _bt(p), _i(p, "V", "vocab_size")
    x = bt * v * s
    return Work(
        inputs=2 * x,
        outputs=s,
        grads=x,
        forward_flops=3 * bt * v,
        backward_flops=2 * bt * v,
        backward_alone=BACKWARD_IN_FORWARD,
    )


def _bt(p) -> int:
    if "BT" in p:
        return _i(p, "BT")
    return _i(p, "B", "bsz") * _i(p, "T", "seq_len")


def _cross_entropy(p, s) -> Work:
    """Logits [BT, V] and int64 targets; the loss; the logits' gradient."""
    bt, v = _bt(p), _i(p, "V", "vocab_size")
    return Work(
        inputs=bt * v * s + bt * INDEX,
        outputs=s,
        grads=bt * v * s,
        forward_flops=3 * bt * v,
        backward_flops=bt * v,
        backward_alone=BACKWARD_IN_FORWARD,
    )


def _megatron_cross_entropy(p, s) -> Work:
    # benchmark_megatron_cross_entropy.py: bf16 logits [S, B, V / TP] on each rank.
    return _cross_entropy({"BT": _i(p, "S") * _i(p, "B"), "V": _i(p, "V") // _i(p, "TP", default=1)}, 2)


def _linear_loss(
    bt: int, s: int, heads: list[tuple[int, int]], grad_heads: int, extra_inputs: int = 0
) -> Work:
    """A loss over a linear head: `heads` are (hidden size, vocab) GEMMs of [BT, hidden] by
    [hidden, vocab] the forward must do (the policy's, a reference's or a teacher's), the first
    `grad_heads` of them trained (their input and weight gradients are written)."""
    read = sum(bt * h * s + v * h * s for h, v in heads) + bt * INDEX + extra_inputs
    grads = sum(bt * h * s + v * h * s for h, v in heads[:grad_heads])
    return Work(
        inputs=read,
        outputs=s,
        grads=grads,
        forward_flops=sum(2 * bt * h * v for h, v in heads),
        backward_flops=sum(4 * bt * h * v for h, v in heads[:grad_heads]),
        backward_alone=BACKWARD_IN_FORWARD,
    )


def _preference_loss(p, s, *, reference: bool = False) -> Work:
    """Chunked preference losses: input [B, T, H] (chosen and rejected), head [V, H], targets."""
    bt, h, v = _i(p, "B") * _i(p, "T"), _i(p, "H"), _i(p, "V")
    heads = [(h, v), (h, v)] if reference else [(h, v)]
    return _linear_loss(bt, s, heads, grad_heads=1)


def _distill_loss(p, s) -> Work:
    """Student input [BT, H/2] with head [V, H/2], teacher input [BT, H] with head [V, H]."""
    h, v = _i(p, "H"), _i(p, "V")
    return _linear_loss(_bt(p), s, [(h // 2, v), (h, v)], grad_heads=1)


def _embedding(p, s) -> Work:
    """int64 indices [B, T] gather rows of [V, D]: writes [B·T, D]. The rows gathered are not
    counted (which rows, and how many distinct ones, is random); the backward writes the whole
    [V, D] gradient from dy."""
    bt, d, v = _i(p, "B") * _i(p, "T"), _i(p, "D"), _i(p, "V")
    out = bt * d * s
    return Work(
        inputs=bt * INDEX,
        outputs=out,
        grads=v * d * s,
        forward_flops=0,
        backward_flops=bt * d,
        backward_reads=bt * INDEX + out,
    )


def _fused_add_rms_norm(p, s) -> Work:
    """x and residual [M, H] and a weight [H]: writes the normalised output and the new residual;
    backward reads both outputs' gradients, x + residual and the weight, writes three gradients."""
    m, h = _i(p, "M"), _i(p, "H")
    x = m * h * s
    return Work(
        inputs=2 * x + h * s,
        outputs=2 * x,
        grads=2 * x + h * s,
        forward_flops=5 * m * h,
        backward_flops=6 * m * h,
        backward_reads=3 * x + h * s,
    )


def _group_norm(p, s) -> Work:
    """x [M, C, H] with per-channel weight and bias [C]."""
    m, c, h = _i(p, "M"), _i(p, "C"), _i(p, "H")
    x, params = m * c * h * s, 2 * c * s
    return Work(
        inputs=x + params,
        outputs=x,
        grads=x + params,
        forward_flops=4 * m * c * h,
        backward_flops=6 * m * c * h,
    )


def _rope(p, s) -> Work:
    """q [1, T, Hq, d] and k [1, T, Hkv, d] rotated by cos and sin [1, T, d], d = hidden / Hq.
    The backward needs only the gradients, cos and sin."""
    t, hq, hkv = _i(p, "T", "seq_len"), _i(p, "num_q_heads"), _i(p, "num_kv_heads")
    d = _i(p, "hidden_size", "H") // hq
    qk, cos_sin = t * (hq + hkv) * d * s, 2 * t * d * s
    return Work(
        inputs=qk + cos_sin,
        outputs=qk,
        grads=qk,
        forward_flops=3 * t * (hq + hkv) * d,
        backward_flops=3 * t * (hq + hkv) * d,
        backward_reads=qk + cos_sin,
    )


def _fused_moe(p, s) -> Work:
    """Tokens x [T, H], a top-K router's fp32 logits [T, E], experts' gate-up [E, 2I, H] and down
    [E, H, I] weights. Each token goes through K experts: 6·T·K·H·I FLOPs forward, twice that
    backward. Only the experts that can receive a token are read: min(E, T·K)."""
    t, h, e, k, inter = _i(p, "T"), _i(p, "H"), _i(p, "E"), _i(p, "K"), _i(p, "intermediate_dim")
    x, weights = t * h * s, min(e, t * k) * 3 * h * inter * s
    return Work(
        inputs=x + weights + t * e * 4,
        outputs=x,
        grads=x + weights,
        forward_flops=6 * t * k * h * inter,
        backward_flops=12 * t * k * h * inter,
    )


def _neighborhood_attention(p, s) -> Work:
    """x [B, L, D] through q, k, v and out projections [D, D] (with bias) and attention over a
    window of `kernel_size` keys per query: 8·B·L·D² + 4·B·L·kernel_size·D FLOPs forward."""
    b, seq, d, ks = _i(p, "batch_size"), _i(p, "seq_len"), _i(p, "hidden_size"), _i(p, "kernel_size")
    x, weights = b * seq * d * s, 4 * (d * d + d) * s
    flops = 8 * b * seq * d * d + 4 * b * seq * ks * d
    return Work(
        inputs=x + weights, outputs=x, grads=x + weights, forward_flops=flops, backward_flops=2 * flops
    )


def _multi_token_attention(p, s) -> Work:
    """Scores x [B, C_in, L, L] convolved with a [C_out, C_in/groups, K, K] kernel (and bias):
    2·B·C_out·L²·(C_in/groups)·K² FLOPs forward, twice that backward."""
    b, cin, cout, seq = _i(p, "B"), _i(p, "C_in"), _i(p, "C_out"), _i(p, "L")
    k, groups = _i(p, "K"), _i(p, "groups", default=1)
    weights = (cout * (cin // groups) * k * k + cout) * s
    x, y = b * cin * seq * seq * s, b * cout * seq * seq * s
    flops = 2 * b * cout * seq * seq * (cin // groups) * k * k
    return Work(
        inputs=x + weights, outputs=y, grads=x + weights, forward_flops=flops, backward_flops=2 * flops
    )


def _megatron_swiglu(p, s) -> Work:
    # benchmark_megatron_swiglu.py: bf16 x [S, B, 2·ffn] → [S, B, ffn], no weights.
    n, ffn = _i(p, "S") * _i(p, "B"), _i(p, "ffn_local")
    return Work(
        inputs=2 * n * ffn * 2,
        outputs=n * ffn * 2,
        grads=2 * n * ffn * 2,
        forward_flops=4 * n * ffn,
        backward_flops=8 * n * ffn,
    )


def _megatron_rms_norm(p, s) -> Work:
    # benchmark_megatron_rms_norm.py: bf16 x [S, B, H] and a weight [H].
    return _rows(
        {"M": _i(p, "S") * _i(p, "B"), "H": _i(p, "H")}, 2, "M", "H", per_row_params=1, flops=4, bwd_flops=6
    )


WORK: dict[str, Callable[[dict, int], Work]] = {
    "geglu": lambda p, s: _mlp(p, s, "bsz"),
    "swiglu": lambda p, s: _mlp(p, s, "B"),
    "tiled_geglu": lambda p, s: _mlp(p, s, "bsz"),
    "tiled_swiglu": lambda p, s: _mlp(p, s, "bsz"),
    "rms_norm": lambda p, s: _rows(p, s, "M", "H", per_row_params=1, flops=4, bwd_flops=6),
    "layer_norm": lambda p, s: _rows(p, s, "M", "N", per_row_params=2, flops=6, bwd_flops=8),
    "softmax": lambda p, s: _rows(p, s, "M", "N", flops=3, bwd_flops=3),
    "relu_squared": lambda p, s: _rows(p, s, "M", "N", flops=2, bwd_flops=2),
    "sparsemax": lambda p, s: _rows({"M": _bt(p), "N": _i(p, "V")}, s, "M", "N", flops=3, bwd_flops=3),
    "fused_add_rms_norm": _fused_add_rms_norm,
    "group_norm": _group_norm,
    "megatron_rms_norm": _megatron_rms_norm,
    "megatron_swiglu": _megatron_swiglu,
    "cross_entropy": _cross_entropy,
    "megatron_cross_entropy": _megatron_cross_entropy,
    "kl_div": _pair_loss,
    "jsd": _pair_loss,
    "tvd": _pair_loss,
    "embedding": _embedding,
    "rope": _rope,
    "llama4_rope": _rope,
    "fused_moe": _fused_moe,
    "fused_neighborhood_attention": _neighborhood_attention,
    "multi_token_attention": _multi_token_attention,
    "sparse_multi_token_attention": _multi_token_attention,
    "fused_linear_cross_entropy": lambda p, s: _linear_loss(
        _bt(p), s, [(_i(p, "H"), _i(p, "V"))], grad_heads=1
    ),
    "fused_linear_jsd": lambda p, s: _linear_loss(_bt(p), s, [(_i(p, "H"), _i(p, "V"))] * 2, grad_heads=1),
    "fused_linear_cpo_loss": _preference_loss,
    "fused_linear_orpo_loss": _preference_loss,
    "fused_linear_simpo_loss": _preference_loss,
    "kto_loss": lambda p, s: _preference_loss(p, s, reference=True),
    "fused_linear_grpo_loss_sequence": lambda p, s: _preference_loss(p, s, reference=True),
    "fused_linear_grpo_loss_token": lambda p, s: _preference_loss(p, s, reference=True),
    "distill_jsd_loss": _distill_loss,
    "distill_cosine_loss": _distill_loss,
}
# The dtype a script uses when the workload names none (liger-kernel 0.8.5's scripts).
DEFAULT_DTYPE = {"megatron_cross_entropy": "bf16", "megatron_rms_norm": "bf16", "megatron_swiglu": "bf16"}


def count(kernel: str, parameters: dict, dtype: str, operation_mode: str) -> dict | None:
    """{bytes, flops, live_bytes, dtype} of one workload's timed pass, {reason} when it cannot be
    counted, or None for a kernel with no formula here."""
    formula = WORK.get(kernel)
    if formula is None:
        return None
    dtype = dtype or DEFAULT_DTYPE.get(kernel, "fp32")
    if dtype not in DTYPE_BYTES:
        return {"reason": f"the dtype {dtype} has no ceiling"}
    try:
        work = formula(parameters, DTYPE_BYTES[dtype])
    except KeyError as exc:
        return {"reason": f"the workload does not give {exc.args[0]}, which the count needs"}
    per_pass = work.passes().get(operation_mode)
    if per_pass is None:
        return {"reason": f"the {operation_mode} pass is not counted"}
    if isinstance(per_pass, str):
        return {"reason": per_pass}
    return {"bytes": per_pass[0], "flops": per_pass[1], "live_bytes": work.inputs, "dtype": dtype}


def work_of(workload, operation_mode: str, *, kernel: str) -> dict | None:
    """The plug-in's `work_counter`: the count of a workload of `kernel`, or None where Liger has
    no formula for the kernel (another source's counter may have one)."""
    return count(kernel, workload.parameters, workload.dtype, operation_mode)
