"""What KernelIndex knows about the Liger-Kernel benchmark data beyond the CSV itself.

Kernel names, the projects behind the providers, the GPUs, and the tensor shapes of the kernels
whose benchmark scripts define them plainly. A kernel missing from TENSORS is imported with its
parameters only; its page says the shapes were not published, rather than guessing them.
"""

from registry.sources.liger.harness import DTYPES  # noqa: F401 - the importer's table of torch dtypes

LIGER_REPOSITORY = "https://github.com/linkedin/Liger-Kernel"

KERNEL_NAMES = {
    "cross_entropy": "Cross entropy",
    "distill_cosine_loss": "Distillation cosine loss",
    "distill_jsd_loss": "Distillation JSD loss",
    "embedding": "Embedding",
    "fused_add_rms_norm": "Fused add + RMSNorm",
    "fused_linear_cpo_loss": "Fused linear CPO loss",
    "fused_linear_cross_entropy": "Fused linear cross entropy",
    "fused_linear_grpo_loss_sequence": "Fused linear GRPO loss (sequence level)",
    "fused_linear_grpo_loss_token": "Fused linear GRPO loss (token level)",
    "fused_linear_jsd": "Fused linear JSD",
    "fused_linear_orpo_loss": "Fused linear ORPO loss",
    "fused_linear_simpo_loss": "Fused linear SimPO loss",
    "fused_moe": "Fused mixture of experts",
    "fused_neighborhood_attention": "Fused neighborhood attention",
    "geglu": "GeGLU MLP",
    "group_norm": "GroupNorm",
    "jsd": "Jensen-Shannon divergence",
    "kl_div": "KL divergence",
    "kto_loss": "KTO loss",
    "layer_norm": "LayerNorm",
    "llama4_rope": "Llama 4 rotary position embedding",
    "megatron_cross_entropy": "Megatron cross entropy",
    "megatron_rms_norm": "Megatron RMSNorm",
    "megatron_swiglu": "Megatron SwiGLU",
    "multi_token_attention": "Multi-token attention",
    "relu_squared": "ReLU²",
    "rms_norm": "RMSNorm",
    "rope": "Rotary position embedding (RoPE)",
    "softmax": "Softmax",
    "sparse_multi_token_attention": "Sparse multi-token attention",
    "sparsemax": "Sparsemax",
    "swiglu": "SwiGLU MLP",
    "tiled_geglu": "Tiled GeGLU MLP",
    "tiled_swiglu": "Tiled SwiGLU MLP",
    "tvd": "Total variation distance",
}

# provider → (project, project URL)
PROJECTS = {
    "liger": ("Liger-Kernel", LIGER_REPOSITORY),
    "huggingface": ("Hugging Face Transformers", "https://github.com/huggingface/transformers"),
    "torch": ("PyTorch", "https://github.com/pytorch/pytorch"),
    "torch_compile": ("PyTorch (torch.compile)", "https://github.com/pytorch/pytorch"),
    "megatron": ("Megatron-LM", "https://github.com/NVIDIA/Megatron-LM"),
    "megatron-fused": ("Megatron-LM", "https://github.com/NVIDIA/Megatron-LM"),
    "megatron-unfused": ("Megatron-LM", "https://github.com/NVIDIA/Megatron-LM"),
    "deepspeed_tiled": ("DeepSpeed", "https://github.com/deepspeedai/DeepSpeed"),
}

# GPU name as the source writes it → (vendor, product, form factor, architecture)
GPUS = {
    "NVIDIA A100-SXM4-80GB": ("NVIDIA", "NVIDIA A100 SXM4 80GB", "SXM4", "sm_80"),
    "NVIDIA H100 80GB HBM3": ("NVIDIA", "NVIDIA H100 80GB HBM3", "SXM5", "sm_90"),
    "NVIDIA H100 PCIe": ("NVIDIA", "NVIDIA H100 PCIe", "PCIe", "sm_90"),
    "NVIDIA H200": ("NVIDIA", "NVIDIA H200", "SXM5", "sm_90"),
    "NVIDIA B200": ("NVIDIA", "NVIDIA B200", "SXM6", "sm_100"),
    "NVIDIA GeForce RTX 3090": ("NVIDIA", "NVIDIA GeForce RTX 3090", "PCIe card", "sm_86"),
    "NVIDIA GeForce RTX 4090": ("NVIDIA", "NVIDIA GeForce RTX 4090", "PCIe card", "sm_89"),
}


# Short names for the workload id and summary; one rule for every kernel.
PARAMETER_ALIASES = {
    "bsz": "batch",
    "B": "batch",
    "batch_size": "batch",
    "T": "seq",
    "S": "seq",
    "seq_len": "seq",
    "L": "seq",
    "H": "hidden",
    "hidden_size": "hidden",
    "intermediate_size": "intermediate",
    "intermediate_dim": "intermediate",
    "V": "vocab",
    "vocab_size": "vocab",
}


def _mlp(batch, p):
    hidden, inter = p.get("hidden_size"), p.get("intermediate_size")
    return [
        ("x", [p.get(batch), p.get("T"), hidden]),
        ("w_up", [inter, hidden]),
        ("w_down", [hidden, inter]),
        ("w_gate", [inter, hidden]),
    ]


def _rows(p, n):
    return p.get("M"), p.get(n)


# kernel → function(parameters) → [(tensor name, shape)]; every tensor takes the workload's dtype
# unless its name says it holds indices.
TENSORS = {
    "geglu": lambda p: _mlp("bsz", p),
    "swiglu": lambda p: _mlp("B", p),
    "rms_norm": lambda p: [("x", [*_rows(p, "H")]), ("weight", [p.get("H")])],
    "layer_norm": lambda p: [("x", [*_rows(p, "N")]), ("weight", [p.get("N")]), ("bias", [p.get("N")])],
    "softmax": lambda p: [("x", [*_rows(p, "N")])],
    "relu_squared": lambda p: [("x", [*_rows(p, "N")])],
    "fused_linear_cross_entropy": lambda p: [
        ("input", [p.get("BT"), p.get("H")]),
        ("weight", [p.get("V"), p.get("H")]),
        ("target:int64", [p.get("BT")]),
    ],
    "embedding": lambda p: [
        ("indices:int64", [p.get("B"), p.get("T")]),
        ("weight", [p.get("V"), p.get("D")]),
    ],
}


def tensors_for(kernel: str, parameters: dict, dtype: str) -> list[dict]:
    build = TENSORS.get(kernel)
    if build is None:
        return []
    shaped = []
    for name, shape in build(parameters):
        if any(not isinstance(size, int) or isinstance(size, bool) for size in shape):
            return []  # a parameter the shape needs is missing: publish no shapes, guess none
        name, _, fixed_dtype = name.partition(":")
        shaped.append({"name": name, "dtype": fixed_dtype or dtype or "unspecified", "shape": shape})
    return shaped
