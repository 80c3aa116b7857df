"""Which upstream benchmark function measures which kernel, and how a stored workload feeds it.

Every entry was read off liger-kernel's benchmark scripts at the pinned version (see
`cache.LIGER_KERNEL_VERSION`). A kernel that is not here is refused, never guessed.

Upstream renamed configuration keys and changed what the swept `x` means in several scripts
after the bundled data was recorded (e.g. rms_norm once swept the hidden size `H` over `M` rows;
0.8.5's `setup_rms_norm` takes `x` as the row count and `hidden_size` from the config). Where the
old workload translates exactly into the new inputs (same tensors, same shapes), an adapter below
says how; where it does not, the workload is refused with the reason.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

# Providers that are plain PyTorch in the upstream scripts: the only ones that run on a CPU.
CPU_PROVIDERS = frozenset({"huggingface", "torch"})


class Unmappable(ValueError):
    """The workload cannot be fed to the upstream function as it stands."""


Adapter = Callable[[str, float, dict], tuple[float, dict]]


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

    @property
    def entry(self) -> str:
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
}

# Kernels of the bundled data with no mapping, and why (shown in refusals).
UNMAPPED = {
    "megatron_cross_entropy": "its script runs a torch.distributed worker per rank and has no "
    "setup or bench function to call",
}
