"""The Liger harness: runs one workload through liger-kernel's own benchmark code, in a child process.

    from registry.reruns.harness import run_job_spec, local_gpu_slug

`run_job_spec(spec, timeout_s=..., timing=...)` never raises for a harness failure: a crash, time-out, CUDA
error or out-of-memory comes back as status "failed" with the log; a kernel it cannot map or a
bad parameter as status "refused" with the reason. The package imports neither torch nor Django
(tests/harness/test_no_django.py): the protocol's settings come in as arguments (`timing`, the
site's settings.CONTROLLED_TIMING), so the kit ships exactly these modules.
"""

import functools
import subprocess
import sys

from registry.reruns.harness.job_result import ANSWER_FIELDS, JobResult
from registry.reruns.harness.session import session_run
from registry.reruns.harness.spec import Refused, gpu_slug, plan_for
from registry.reruns.harness.timing import DEFAULT_SETTINGS, protocol_core
from registry.reruns.harness.upstream import (
    LIGER_KERNEL_VERSION,
    LIGER_REPOSITORY,
    HarnessMissing,
    harness_ready,
)

# Which of liger-kernel's benchmark scripts measures which kernel is Liger's part, kept in its
# folder (registry/sources/liger/harness.py): this harness runs Liger's scripts, so it imports it,
# and the kit ships it as harness/kernels.py (registry/reruns/kit/build.py).
from registry.sources.liger.harness import (
    KERNELS,
    UNMAPPED,
    missed_upstream_warmup,
    refusal_reasons,
    upstream_warmup_for,
)

__all__ = [
    "KERNELS",
    "LIGER_KERNEL_VERSION",
    "UNMAPPED",
    "missed_upstream_warmup",
    "refusal_reasons",
    "upstream_warmup_for",
    "gpu_slug",
    "local_gpu",
    "local_gpu_slug",
    "local_gpus",
    "protocol_for",
    "run_job_spec",
]

# v2: peaks read from a reset allocator (timing.memory_state_reset). The peaks of the first
# family, "kernelindex/liger-peak-memory", counted the cuBLAS workspaces of whatever job had run
# before in the same process (docs/protocol.md, "Memory").
MEMORY_FAMILY = "kernelindex/liger-peak-memory-v2"
COMPARABILITY = (
    "Comparable only with KernelIndex-controlled runs of the same kernel, workload, timed pass, "
    "GPU model and protocol."
)


def run_job_spec(spec: dict, *, timeout_s: float, timing: dict = DEFAULT_SETTINGS) -> dict:
    try:
        plan = plan_for(spec)
    except Refused as exc:
        return _result("refused", error=str(exc))
    try:
        root = harness_ready()
    except HarnessMissing as exc:
        return _result("failed", error=str(exc))
    plan["protocol"] = dict(timing)
    answer = session_run(plan, root=root, timeout_s=timeout_s)
    if answer.get("environment"):
        answer["environment"]["gpu_slug"] = gpu_slug(answer["environment"].get("gpu_name", ""))
    return _result(
        answer["status"],
        error=answer.get("error", ""),
        log=answer.get("log", ""),
        protocol=protocol_for(device=plan["device"], metric=plan["metric"], timing=timing),
        **{k: answer[k] for k in ANSWER_FIELDS if k in answer},
        sampling=answer.get("measured", {}),
    )


@functools.cache
def local_gpus() -> tuple[tuple[str, str], ...]:
    """(model slug, UUID) of every CUDA device this process sees (after CUDA_VISIBLE_DEVICES), in
    CUDA's order; () without one. The slug is the importer's ("NVIDIA A100-SXM4-80GB" ->
    "nvidia-a100-sxm4-80gb"). Asked in a child process, so that the worker itself never
    initialises CUDA (a forked pool process could not use it afterwards)."""
    probe = (
        "import torch\n"
        "for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):\n"
        "    p = torch.cuda.get_device_properties(i)\n"
        "    u = str(getattr(p, 'uuid', '') or '')\n"
        "    print(torch.cuda.get_device_name(i) + '\\t' + (u if not u or u.startswith('GPU-') else 'GPU-' + u))\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return ()
    lines = out.stdout.splitlines() if out.returncode == 0 else []
    return tuple(
        (gpu_slug(name), uuid) for name, tab, uuid in (line.partition("\t") for line in lines) if tab
    )


def local_gpu() -> tuple[str, str]:
    """(model slug, UUID) of this process's CUDA device 0, or ("cpu", "") without one."""
    gpus = local_gpus()
    return gpus[0] if gpus else ("cpu", "")


def local_gpu_slug() -> str:
    return local_gpu()[0]


def protocol_for(*, device: str, metric: str, timing: dict = DEFAULT_SETTINGS) -> dict:
    """The protocol of a controlled run, its one description: the worker reports it with its
    result, and the recorder makes it the measured run's protocol spec. The same for every job of
    one device kind and metric, so that its digest names it. What varies per job (when sampling
    stopped, the precision reached, the budget) is in the result's `sampling`. docs/protocol.md
    says the same in words."""
    common = {
        "harness": "Liger-Kernel benchmark scripts",
        "harnessRepository": LIGER_REPOSITORY,
        "harnessVersion": f"liger-kernel {LIGER_KERNEL_VERSION} source distribution",
        "statistic": "median",
        "quantiles": [0.5, 0.2, 0.8],
    }
    if metric == "memory":
        return {
            **common,
            "name": "KernelIndex controlled run: Liger-Kernel memory benchmark",
            "timer": "torch.cuda.max_memory_allocated",
            "comparabilityFamily": MEMORY_FAMILY,
            "samples": "the 10 peaks (MiB) that utils._test_memory takes its quantiles of; "
            "max_memory_reserved read beside each",
            "startingState": "cuBLAS and cuBLASLt workspaces and cached blocks freed before the "
            "upstream call (timing.memory_state_reset), so that a peak does not depend on the "
            "jobs that ran before it in the process",
            "notes": "Peak max_memory_allocated() over 10 runs of the upstream pass, in MiB "
            "(labelled MB as upstream does). " + COMPARABILITY,
        }
    if device == "cpu":
        return {
            **common,
            **protocol_core("cpu", timing),
            "notes": "The upstream setup and pass on the CPU, for the plain-PyTorch providers, "
            "sampled by KernelIndex's loop (docs/protocol.md). Not comparable with any GPU "
            "timing. " + COMPARABILITY,
        }
    return {
        **common,
        **protocol_core("cuda", timing),
        "notes": "The upstream setup and the callable upstream hands to do_bench, sampled by "
        "KernelIndex's loop (docs/protocol.md): each sample one call timed with CUDA events after "
        "a write of twice the L2 cache. Upstream's own do_bench figure is kept beside it. " + COMPARABILITY,
    }


def _result(status, **fields) -> dict:
    return JobResult(status, **fields).as_wire()
