"""What KernelBench's published figures are: the source, its timing protocol, its GPUs and the
implementations (PyTorch eager and each torch.compile configuration). No Django here."""

import re

from registry import digests

REPOSITORY = "https://github.com/ScalingIntelligence/KernelBench"
SOURCE = {
    "slug": "kernelbench",
    "name": "KernelBench reference timings",
    "url": REPOSITORY,
    "license": "MIT",
    "license_url": f"{REPOSITORY}/blob/main/LICENSE",
    "description": "The timing of each KernelBench problem's PyTorch reference, eager and under "
    "torch.compile, on many GPUs, as published in results/timing/ of the KernelBench repository "
    "(Scaling Intelligence Lab, Stanford), every version of its history.",
}
COMPARABILITY_NOTE = (
    "Comparable only within one problem file (one workload) and one GPU: eager against the "
    "torch.compile configurations. No L2 flush, a mean over calls each timed with a pair of CUDA "
    "events, figures rounded to three significant digits: not comparable with the Liger-Kernel "
    "benchmarks (a median from triton's do_bench) or KernelIndex's controlled runs."
)
PROTOCOL = {
    "name": "KernelBench reference timing",
    "harness": "KernelBench time_execution_with_cuda_event",
    "harnessRepository": REPOSITORY,
    "timer": "CUDA events, one pair per call, synchronised",
    "statistic": "mean",
    "warmupCalls": 3,
    "l2Flush": False,
    "rounding": "three significant digits",
    "comparabilityFamily": "kernelbench/cuda-event-mean",
    "notes": "3 warm-up calls, then num_trials calls of Model(*get_inputs()) under torch.no_grad, "
    "each timed with a pair of CUDA events and a synchronize; the source publishes the mean, std, "
    "min and max of those calls in ms. " + COMPARABILITY_NOTE,
}
# GPU names as the rows' `hardware` field gives them: (vendor, product, form factor, architecture).
# The products shared with Liger's data are named as Liger's catalog names them.
GPUS = {
    "NVIDIA L40S": ("NVIDIA", "NVIDIA L40S", "PCIe", "sm_89"),
    "NVIDIA L4": ("NVIDIA", "NVIDIA L4", "PCIe", "sm_89"),
    "NVIDIA A10": ("NVIDIA", "NVIDIA A10", "PCIe", "sm_86"),
    "NVIDIA A10G": ("NVIDIA", "NVIDIA A10G", "PCIe", "sm_86"),
    "Tesla T4": ("NVIDIA", "NVIDIA T4", "PCIe", "sm_75"),
    "NVIDIA A100-SXM4-40GB": ("NVIDIA", "NVIDIA A100 SXM4 40GB", "SXM4", "sm_80"),
    "NVIDIA A100-SXM4-80GB": ("NVIDIA", "NVIDIA A100 SXM4 80GB", "SXM4", "sm_80"),
    "NVIDIA H100 80GB HBM3": ("NVIDIA", "NVIDIA H100 80GB HBM3", "SXM5", "sm_90"),
    "NVIDIA H100 PCIe": ("NVIDIA", "NVIDIA H100 PCIe", "PCIe", "sm_90"),
    "NVIDIA B200": ("NVIDIA", "NVIDIA B200", "SXM6", "sm_100"),
    # KernelBench publishes none: the cards KernelIndex's own harness measured it on.
    "NVIDIA H200": ("NVIDIA", "NVIDIA H200", "SXM5", "sm_90"),
}
EAGER = "eager"
_COMPILE = re.compile(r"^baseline_time_torch_compile_(?P<rest>.+)\.json$")
_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def configuration_of(file_name: str) -> tuple[str, str | None, str | None]:
    """(provider, backend, mode) from a timing file's name: `baseline_time_torch.json` is eager;
    `..._torch_compile_inductor_<mode>.json` and `..._torch_compile_cudagraphs.json` name theirs;
    the first files (`..._torch_compile_<host>.json`) were inductor's default."""
    match = _COMPILE.match(file_name)
    if not match:
        return EAGER, None, None
    rest = match["rest"]
    if rest == "cudagraphs":
        return "compile-cudagraphs", "cudagraphs", None
    mode = rest.removeprefix("inductor_") if rest.startswith("inductor_") else "default"
    mode = mode if mode in _MODES else "default"
    return f"compile-inductor-{mode}", "inductor", mode


def host_of(file_key: str) -> str:
    """The folder a timing file sits in (`L40S_matx3`), or for the first top-level files the
    name's last part (`baseline_time_matx2.json` → `matx2`)."""
    folder, _, name = file_key.rpartition("/")
    if folder:
        return folder
    return name.removesuffix(".json").rsplit("_", 1)[-1]


def implementation_spec(kernel: str, provider: str, backend: str | None, mode: str | None) -> dict:
    if backend is None:
        description = "PyTorch eager: the problem's reference Model as written"
    elif mode is None:
        description = f"torch.compile(model, backend={backend!r})"
    else:
        description = f"torch.compile(model, backend={backend!r}, mode={mode!r})"
    return {
        "kernel": kernel,
        "provider": provider,
        "project": "PyTorch",
        "projectUrl": "https://github.com/pytorch/pytorch",
        "revision": "",
        "description": description,
        "compile": None if backend is None else {"backend": backend, "mode": mode},
    }


def environment_spec(hardware: str, *, software: dict | None = None) -> dict:
    """A GPU as the rows' `hardware` names it (digests.environment_spec); a controlled run passes the
    `software` its harness captured (KernelBench's rows record none)."""
    return digests.environment_spec(hardware, GPUS, software=software)
