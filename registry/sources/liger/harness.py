"""Liger's harness mapping: which upstream benchmark function measures which kernel, and how a
stored workload feeds it. The rerun harness (registry/reruns/harness/, which runs liger-kernel's
benchmark scripts) reads it; the reproduction kit ships it as `harness/kernels.py`
(registry/reruns/kit/build.py). Standard library only: no Django, nothing else of the site.

Every entry was read off liger-kernel's benchmark scripts at the pinned version (see
`registry/reruns/harness/upstream.py`, LIGER_KERNEL_VERSION). A kernel that is not here is
refused, never guessed.

Upstream renamed configuration keys and changed what the swept `x` means in several scripts
after the bundled data was recorded (e.g. rms_norm once swept the hidden size `H` over `M` rows;
0.8.5's `setup_rms_norm` takes `x` as the row count and `hidden_size` from the config). Where the
old workload translates exactly into the new inputs (same tensors, same shapes), an adapter below
says how; where it does not, the workload is refused with the reason.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

# The torch dtype names a spec may name, with the workloads' short names for them: stated here,
# in the module the kit ships, so that the harness and the importer (catalog.py) share one table.
DTYPES = {
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "torch.float64": "fp64",
    "torch.float8_e4m3fn": "fp8e4m3",
    "torch.float8_e5m2": "fp8e5m2",
    "torch.int64": "int64",
    "torch.int32": "int32",
}

# Providers that are plain PyTorch in the upstream scripts: the only ones that run on a CPU.
CPU_PROVIDERS = frozenset({"huggingface", "torch"})


class Unmappable(ValueError):
    """The workload cannot be fed to the upstream function as it stands."""


Adapter = Callable[[str, float, dict], tuple[float, dict]]


@dataclass(frozen=True)
class Refusal:
    """Workloads of a mapped kernel that 0.8.5's script cannot run as the source ran them; an empty
    field matches every value. The reason is shown to users as it is written here."""

    reason: str
    providers: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()  # "latency", "memory"
    operation_modes: tuple[str, ...] = ()

    def matches(self, provider: str, metric: str, operation_mode: str) -> bool:
        return (
            (not self.providers or provider in self.providers)
            and (not self.metrics or metric in self.metrics)
            and (not self.operation_modes or operation_mode in self.operation_modes)
        )


@dataclass(frozen=True)
class KernelMap:
    script: str  # module in benchmark/scripts
    providers: frozenset[str]
    requires: tuple[str, ...]  # config keys the upstream function reads for a numeric x
    setup: str = ""  # setup_<kernel>(input) -> (x, layer) for utils.build_*_bench_fn
    bench_speed: str = ""  # or the script's own bench functions
    bench_memory: str = ""
    adapt: Adapter | None = None
    requires_values: dict = field(default_factory=dict)  # config key -> the value it must have
    refusals: tuple[Refusal, ...] = ()
    # Tensor-parallel scripts: the config key holding the number of ranks. Such a kernel runs
    # through registry/reruns/harness/distributed.py (entry "distributed"), not SingleBenchmarkRunInput.
    world_size_key: str = ""
    # What the script's `__main__` runs before any benchmark and the harness must run too, for
    # these providers: a name in the harness's runner.UPSTREAM_WARMUPS, which says how it calls
    # upstream's code.
    warmup: str = ""
    warmup_providers: frozenset[str] = frozenset()

    @property
    def entry(self) -> str:
        if self.world_size_key:
            return "distributed"
        return "setup" if self.setup else "bench"


def _renamed(config: dict, **renames: str) -> dict:
    """Config with keys renamed old=new; only keys that are present are renamed."""
    out = dict(config)
    for old, new in renames.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def _rows_of(sweep: str, size_key: str) -> Adapter:
    """Old scripts swept a feature size `sweep` over `M` rows; 0.8.5 takes x as the row count
    and the feature size from `size_key`. Same tensor: (M, size)."""

    def adapt(x_name, x, config):
        if x_name == sweep and "M" in config:
            rest = {k: v for k, v in config.items() if k not in ("M", sweep)}
            return config["M"], {**rest, size_key: x}
        return x, config

    return adapt


def _tokens_of_vocab(x_name, x, config):
    """Old loss scripts swept the vocabulary `V` over B x T tokens; 0.8.5 takes x = B*T tokens
    and `vocab_size`. Same tensor: (B*T, V)."""
    if x_name == "V" and "B" in config and "T" in config:
        rest = {k: v for k, v in config.items() if k not in ("B", "T", "V")}
        return config["B"] * config["T"], {**rest, "vocab_size": x}
    return x, config


def _sparsemax(x_name, x, config):
    """Old: x = V features over B x T rows; 0.8.5: x = rows, hidden_size = features."""
    if x_name == "V" and "B" in config and "T" in config:
        rest = {k: v for k, v in config.items() if k not in ("B", "T", "V")}
        return config["B"] * config["T"], {**rest, "hidden_size": x}
    return x, config


def _embedding(x_name, x, config):
    """Old: x = vocabulary V, B sequences of T tokens, D wide; 0.8.5: x = B*T tokens with T from
    the config, hidden_size D, vocab_size V. Same ids (B, T) and table (V, D)."""
    if x_name == "V" and {"B", "T", "D"} <= config.keys():
        rest = {k: v for k, v in config.items() if k not in ("B", "D", "V")}
        return config["B"] * config["T"], {**rest, "hidden_size": config["D"], "vocab_size": x}
    return x, config


def _rope(x_name, x, config):
    """Old: heads named num_q_heads / num_kv_heads, and either x = H over seq_len tokens or
    x = T with hidden_size; 0.8.5: x = tokens, hidden_size, num_attention_heads,
    num_key_value_heads."""
    config = _renamed(config, num_q_heads="num_attention_heads", num_kv_heads="num_key_value_heads")
    if x_name == "H" and "seq_len" in config:
        rest = {k: v for k, v in config.items() if k not in ("seq_len", "H")}
        return config["seq_len"], {**rest, "hidden_size": x}
    return x, config


def _group_norm(x_name, x, config):
    """Old: x = C channels, M samples of H; 0.8.5: x = M*H, hidden_size = channels, H from the
    config (it derives M = x // H). Same tensor: (M, C, H)."""
    if x_name == "C" and {"M", "H"} <= config.keys():
        rest = {k: v for k, v in config.items() if k not in ("M", "C")}
        return config["M"] * config["H"], {**rest, "hidden_size": x}
    return x, config


def _swiglu(x_name, x, config):
    return x, _renamed(config, B="bsz")


def _lm_head(x_name, x, config):
    """The fused-linear and chunked losses: old scripts read the hidden size and vocabulary as `H`
    and `V`; 0.8.5's setup functions read `hidden_size` and `vocab_size`. x (BT tokens, or B
    sequences of the config's T tokens) means the same in both. Same tensors: input (BT, H) or
    (B, T, H), head weight (V, H), targets (BT,) or (B, T)."""
    return x, _renamed(config, H="hidden_size", V="vocab_size")


MAX_WORLD_SIZE = 8


def _tensor_parallel(x_name, x, config):
    """megatron_cross_entropy: x is the global vocabulary V, split over TP ranks (V/TP logits a
    rank: `_make_inputs(S, B, V // TP, V)`). V must split evenly, or the ranks' logits would not
    cover the vocabulary the row names."""
    tp = config.get("TP")
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_WORLD_SIZE:
        raise Unmappable(
            f"TP (the number of tensor-parallel ranks) must be a whole number from 1 to {MAX_WORLD_SIZE}, not {tp!r}"
        )
    if x_name == "V" and (not float(x).is_integer() or int(x) % tp):
        raise Unmappable(f"the vocabulary V = {x} does not split evenly over TP = {tp} ranks")
    return x, config


KERNELS: dict[str, KernelMap] = {
    "geglu": KernelMap(
        script="benchmark_geglu",
        setup="setup_geglu",
        providers=frozenset({"liger", "huggingface"}),
        requires=("bsz", "hidden_size", "intermediate_size", "hidden_act", "dtype"),
    ),
    "swiglu": KernelMap(
        script="benchmark_swiglu",
        setup="setup_swiglu",
        providers=frozenset({"liger", "huggingface"}),
        requires=("bsz", "hidden_size", "intermediate_size", "hidden_act", "dtype"),
        adapt=_swiglu,
    ),
    "rms_norm": KernelMap(
        script="benchmark_rms_norm",
        setup="setup_rms_norm",
        providers=frozenset({"liger", "huggingface"}),
        requires=("hidden_size", "dtype", "eps"),
        adapt=_rows_of("H", "hidden_size"),
    ),
    "layer_norm": KernelMap(
        script="benchmark_layer_norm",
        setup="setup_layer_norm",
        providers=frozenset({"liger", "torch"}),
        requires=("hidden_size", "dtype", "eps"),
        adapt=_rows_of("N", "hidden_size"),
    ),
    "fused_add_rms_norm": KernelMap(
        script="benchmark_fused_add_rms_norm",
        setup="setup_fused_add_rms_norm",
        providers=frozenset({"liger_fused_add_rms_norm", "liger_rms_norm", "torch"}),
        requires=("hidden_size", "dtype", "eps"),
        adapt=_rows_of("H", "hidden_size"),
    ),
    "relu_squared": KernelMap(
        script="benchmark_relu_squared",
        setup="setup_relu_squared",
        providers=frozenset({"liger", "torch"}),
        requires=("hidden_size", "dtype"),
        adapt=_rows_of("N", "hidden_size"),
    ),
    "softmax": KernelMap(
        script="benchmark_softmax",
        setup="setup_softmax",
        providers=frozenset({"liger", "torch"}),
        requires=("hidden_size", "dtype"),
        adapt=_rows_of("N", "hidden_size"),
    ),
    "sparsemax": KernelMap(
        script="benchmark_sparsemax",
        setup="setup_sparsemax",
        providers=frozenset({"liger", "torch"}),
        requires=("hidden_size", "dtype"),
        adapt=_sparsemax,
    ),
    "cross_entropy": KernelMap(
        script="benchmark_cross_entropy",
        setup="setup_cross_entropy",
        providers=frozenset({"liger", "torch"}),
        requires=("vocab_size",),
        adapt=_tokens_of_vocab,
    ),
    "kl_div": KernelMap(
        script="benchmark_kl_div",
        setup="setup_kl_div",
        providers=frozenset({"liger", "torch"}),
        requires=("vocab_size",),
        adapt=_tokens_of_vocab,
    ),
    "jsd": KernelMap(
        script="benchmark_jsd",
        setup="setup_jsd",
        providers=frozenset({"liger", "torch"}),
        requires=("vocab_size",),
        adapt=_tokens_of_vocab,
    ),
    "tvd": KernelMap(
        script="benchmark_tvd",
        setup="setup_tvd",
        providers=frozenset({"liger", "torch"}),
        requires=("vocab_size",),
        adapt=_tokens_of_vocab,
    ),
    "embedding": KernelMap(
        script="benchmark_embedding",
        setup="setup_embedding",
        providers=frozenset({"liger", "torch", "torch_compile"}),
        requires=("T", "hidden_size", "vocab_size", "dtype"),
        adapt=_embedding,
    ),
    "group_norm": KernelMap(
        script="benchmark_group_norm",
        setup="setup_group_norm",
        providers=frozenset({"liger", "torch"}),
        requires=("H", "hidden_size", "channels_per_group", "dtype", "eps"),
        adapt=_group_norm,
    ),
    "rope": KernelMap(
        script="benchmark_rope",
        setup="setup_rope",
        providers=frozenset({"liger", "huggingface"}),
        requires=("hidden_size", "num_attention_heads", "num_key_value_heads", "dtype"),
        adapt=_rope,
    ),
    "llama4_rope": KernelMap(
        script="benchmark_llama4_rope",
        setup="setup_llama4_rope",
        providers=frozenset({"liger", "huggingface"}),
        requires=("hidden_size", "num_attention_heads", "num_key_value_heads", "dtype"),
        adapt=_rope,
    ),
    "fused_moe": KernelMap(
        script="benchmark_fused_moe",
        bench_speed="bench_speed_fused_moe",
        bench_memory="bench_memory_fused_moe",
        providers=frozenset({"liger", "huggingface"}),
        # T and E: the swept one comes from x (the config holds null for it).
        requires=("sweep_dim", "H", "intermediate_dim", "K", "dtype"),
        # Upstream runs `_warmup_liger` at the model's base T before its sweep, and Triton's
        # autotuner keeps the config it picks there for every point: without it, the first liger
        # job of a worker's process would pick the config for its own T, and keep it for the rest.
        warmup="fused_moe_autotune",
        warmup_providers=frozenset({"liger"}),
    ),
    "fused_neighborhood_attention": KernelMap(
        script="benchmark_fused_neighborhood_attention",
        bench_speed="bench_speed_fused_neighborhood_attention",
        bench_memory="bench_memory_fused_neighborhood_attention",
        providers=frozenset({"liger", "torch"}),
        requires=("batch_size", "hidden_size", "num_heads", "kernel_size", "dilation", "bias", "dtype"),
    ),
    "multi_token_attention": KernelMap(
        script="benchmark_multi_token_attention",
        bench_speed="bench_speed_multi_token_attention",
        bench_memory="bench_memory_multi_token_attention",
        providers=frozenset({"liger", "torch"}),
        requires=("B", "C_in", "C_out", "K", "groups", "bias", "dtype"),
    ),
    "sparse_multi_token_attention": KernelMap(
        script="benchmark_sparse_multi_token_attention",
        bench_speed="bench_speed_sparse_multi_token_attention",
        bench_memory="bench_memory_sparse_multi_token_attention",
        providers=frozenset({"liger", "torch"}),
        requires=("B", "C_in", "C_out", "K", "groups", "bias", "dtype"),
    ),
    "megatron_rms_norm": KernelMap(
        # The megatron provider needs megatron-core, which the worker does not install.
        script="benchmark_megatron_rms_norm",
        bench_speed="bench_speed_megatron_rms_norm",
        bench_memory="bench_memory_megatron_rms_norm",
        providers=frozenset({"liger", "torch"}),
        requires=("S", "B"),
    ),
    "megatron_swiglu": KernelMap(
        script="benchmark_megatron_swiglu",
        bench_speed="bench_speed_megatron_swiglu",
        bench_memory="bench_memory_megatron_swiglu",
        providers=frozenset({"liger", "liger_in_place", "torch"}),
        requires=("S", "B"),
    ),
    "tiled_geglu": KernelMap(
        script="benchmark_tiled_mlp",
        bench_speed="bench_speed_tiled_mlp",
        bench_memory="bench_memory_tiled_mlp",
        providers=frozenset({"huggingface", "liger", "liger_tiled", "deepspeed_tiled"}),
        requires=("bsz", "hidden_size", "intermediate_size", "hidden_act", "activation_type", "dtype"),
        requires_values={"activation_type": "geglu"},
    ),
    "tiled_swiglu": KernelMap(
        script="benchmark_tiled_mlp",
        bench_speed="bench_speed_tiled_mlp",
        bench_memory="bench_memory_tiled_mlp",
        providers=frozenset({"huggingface", "liger", "liger_tiled", "deepspeed_tiled"}),
        requires=("bsz", "hidden_size", "intermediate_size", "hidden_act", "activation_type", "dtype"),
        requires_values={"activation_type": "swiglu"},
    ),
    "fused_linear_cross_entropy": KernelMap(
        # Bundled provider "huggingface" is the script's TorchLMHeadCE (nn.Linear + nn.CrossEntropyLoss),
        # named "torch" since; 0.8.5's setup builds TorchLMHeadCE for every provider but the liger ones.
        script="benchmark_fused_linear_cross_entropy",
        setup="setup_fused_linear_cross_entropy",
        providers=frozenset({"liger", "huggingface", "torch"}),
        requires=("hidden_size", "vocab_size", "dtype"),
        adapt=_lm_head,
    ),
    "fused_linear_jsd": KernelMap(
        script="benchmark_fused_linear_jsd",
        setup="setup_fused_linear_jsd",
        providers=frozenset({"liger", "torch"}),
        requires=("hidden_size", "vocab_size", "dtype"),
        adapt=_lm_head,
    ),
    "fused_linear_orpo_loss": KernelMap(
        # 0.8.5 adds an `nll_target` of the targets' shape (B, T) for the NLL term, which the
        # bundled rows computed against the targets themselves: same shapes, same work.
        script="benchmark_orpo_loss",
        setup="setup_orpo_loss",
        providers=frozenset({"liger", "huggingface"}),
        requires=("T", "hidden_size", "vocab_size", "dtype"),
        adapt=_lm_head,
    ),
    "fused_linear_cpo_loss": KernelMap(
        script="benchmark_cpo_loss",
        setup="setup_cpo_loss",
        providers=frozenset({"liger", "huggingface"}),
        requires=("T", "hidden_size", "vocab_size", "dtype"),
        adapt=_lm_head,
    ),
    "fused_linear_grpo_loss_token": KernelMap(
        script="benchmark_grpo_loss",
        setup="setup_grpo_loss",
        providers=frozenset({"liger", "torch"}),
        requires=("T", "hidden_size", "vocab_size", "dtype", "importance_sampling_level"),
        requires_values={"importance_sampling_level": "token"},
        adapt=_lm_head,
    ),
    "fused_linear_grpo_loss_sequence": KernelMap(
        script="benchmark_grpo_loss",
        setup="setup_grpo_loss",
        providers=frozenset({"liger", "torch"}),
        requires=("T", "hidden_size", "vocab_size", "dtype", "importance_sampling_level"),
        requires_values={"importance_sampling_level": "sequence"},
        adapt=_lm_head,
    ),
    "kto_loss": KernelMap(
        script="benchmark_kto_loss",
        setup="setup_kto_loss",
        providers=frozenset({"liger", "huggingface"}),
        requires=("T", "hidden_size", "vocab_size", "dtype", "bias", "beta", "ignore_index"),
        adapt=_lm_head,
        refusals=(
            Refusal(
                metrics=("latency",),
                reason="the source timed it with its old bench_speed_kto_loss, which built the "
                "reference model's head without a bias (use_bias=bias, use_ref_bias left False), "
                "while 0.8.5's setup_kto_loss gives the reference head a bias of V values too "
                "(use_ref_bias=bias); the old speed workload cannot be rebuilt with 0.8.5's "
                "script. Its memory rows built both heads with the bias, as 0.8.5 does, and are mapped",
            ),
        ),
    ),
    "distill_jsd_loss": KernelMap(
        script="benchmark_distill_jsd_loss",
        setup="setup_distill_jsd_loss",
        providers=frozenset({"liger", "torch"}),
        requires=(
            "hidden_size",
            "vocab_size",
            "dtype",
            "bias",
            "weight_hard_loss",
            "weight_soft_loss",
            "ignore_index",
        ),
        adapt=_lm_head,
    ),
    "distill_cosine_loss": KernelMap(
        script="benchmark_distill_cosine_loss",
        setup="setup_distill_cosine_loss",
        providers=frozenset({"liger", "torch"}),
        requires=(
            "hidden_size",
            "vocab_size",
            "dtype",
            "bias",
            "weight_hard_loss",
            "weight_soft_loss",
            "ignore_index",
        ),
        adapt=_lm_head,
    ),
    "megatron_cross_entropy": KernelMap(
        # No setup or bench function of one input: main() spawns TP ranks, each of which calls
        # these per-rank functions inside a process group; distributed.py does the same.
        script="benchmark_megatron_cross_entropy",
        bench_speed="_bench_speed_one",
        bench_memory="_bench_memory_one",
        providers=frozenset({"liger"}),
        requires=("S", "B", "TP"),
        adapt=_tensor_parallel,
        world_size_key="TP",
        refusals=(
            Refusal(
                providers=("megatron-fused", "megatron-unfused"),
                reason="Megatron-LM's own cross-entropy (fused_vocab_parallel_cross_entropy, "
                "vocab_parallel_cross_entropy) comes from megatron-core, which the worker does not "
                "install; without it the 0.8.5 script offers only the liger provider",
            ),
            Refusal(
                metrics=("memory",),
                operation_modes=("forward", "backward"),
                reason="the script's _bench_memory_one measures one full forward and backward "
                "pass only; it has no peak memory of a forward or backward pass alone",
            ),
        ),
    ),
}

# Kernels of the bundled data with no mapping, and why (shown in refusals).
UNMAPPED = {
    "fused_linear_simpo_loss": "liger-kernel 0.8.5's setup_simpo_loss cannot rebuild either of its "
    "bundled workloads. Provider huggingface: 0.8.5 builds TorchLMHeadCPO with its default "
    "loss_type 'sigmoid', the CPO reference loss, where the bundled rows timed the SimPO reference "
    "(HFCPOLoss with loss_type 'simpo'). Provider liger: 0.8.5's LigerFusedLinearSimPOLoss "
    "defaults to compute_nll_loss=True and adds the NLL term of the chosen half, where the "
    "bundled rows called LigerFusedLinearSimPOFunction with its then default compute_nll_loss=False; "
    "the setup function takes neither setting from the workload",
}


def refusal_reasons() -> dict[str, list[str]]:
    """Every reason the harness refuses a bundled kernel, or a part of one, by kernel: the one
    list for the run page and `docs/gpu-hosts.md`."""
    reasons = {kernel: [reason] for kernel, reason in UNMAPPED.items()}
    for kernel, mapping in KERNELS.items():
        for refusal in mapping.refusals:
            reasons.setdefault(kernel, []).append(refusal.reason)
    return reasons


def upstream_warmup_for(kernel: str, provider: str) -> str:
    """The name of the script's own warm-up that a job of `kernel` and `provider` runs before its
    setup (KernelMap.warmup, in runner.UPSTREAM_WARMUPS), or "" for none."""
    mapping = KERNELS.get(kernel)
    return mapping.warmup if mapping and provider in mapping.warmup_providers else ""


def missed_upstream_warmup(kernel: str, provider: str, sampling) -> bool:
    """A measurement of `kernel` and `provider` whose script's own warm-up the harness runs now,
    recorded before it did: its job's `sampling` says nothing of `upstream_warmup`."""
    ran = isinstance(sampling, dict) and sampling.get("upstream_warmup")
    return bool(upstream_warmup_for(kernel, provider)) and not ran
