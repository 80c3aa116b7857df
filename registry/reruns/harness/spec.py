"""Check a job spec and turn it into the plan the child process runs, or refuse it.

Nothing here runs code from the spec: the kernel picks an entry of a fixed table, every other
value is checked for type and range, and the plan carries only plain data.
"""

import math
import re
import unicodedata

from registry.sources.liger.harness import (  # the torch dtype names a spec may name: DTYPES
    CPU_PROVIDERS,
    DTYPES,
    KERNELS,
    UNMAPPED,
    Unmappable,
    upstream_warmup_for,
)

MODES = ("forward", "backward", "full")
METRICS = ("latency", "memory")
DEVICES = ("cpu", "cuda")
NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_CONFIG_KEYS = 32
MAX_NUMBER = 2**40


class Refused(ValueError):
    """The spec cannot be run as it stands; the message says why."""


def plan_for(spec) -> dict:
    """The validated plan for `spec`, or `Refused` naming the first problem."""
    if not isinstance(spec, dict):
        raise Refused("the job spec must be a JSON object")
    kernel = _name(spec, "kernel")
    mapping = KERNELS.get(kernel)
    if mapping is None:
        reason = UNMAPPED.get(kernel, "the harness has no mapping of it to an upstream benchmark function")
        raise Refused(f"kernel {kernel!r} is not mapped: {reason}")
    provider = _name(spec, "provider")
    mode = _choice(spec, "operation_mode", MODES)
    metric = _choice(spec, "metric", METRICS)
    device = _choice(spec, "device", DEVICES)
    x_name = _name(spec, "x_name")
    x_value = _size(spec.get("x_value"), "x_value")
    config = _config(spec.get("config"))
    for refusal in mapping.refusals:
        if refusal.matches(provider, metric, mode):
            raise Refused(f"{kernel}: {refusal.reason}")
    if provider not in mapping.providers:
        raise Refused(
            f"provider {provider!r} is not one that {mapping.script}.py offers for {kernel} "
            f"({', '.join(sorted(mapping.providers))})"
        )
    if device == "cpu" and provider not in CPU_PROVIDERS:
        raise Refused(f"provider {provider!r} runs Triton kernels and needs a CUDA GPU")
    if device == "cpu" and metric == "memory":
        raise Refused("peak memory is read from the CUDA allocator; a CPU run measures latency only")
    x_value, config = _adapted(mapping, kernel, x_name, x_value, config)
    return {
        "kernel": kernel,
        "provider": provider,
        "operation_mode": mode,
        "metric": metric,
        "device": device,
        "x_name": x_name,
        "x_value": x_value,
        "config": config,
        "script": mapping.script,
        "entry": mapping.entry,
        "function": _function(mapping, metric),
        "warmup": upstream_warmup_for(kernel, provider),
        # Processes the workload runs on: 1, or a tensor-parallel kernel's ranks (one GPU each).
        "world_size": config[mapping.world_size_key] if mapping.world_size_key else 1,
    }


def _adapted(mapping, kernel, x_name, x_value, config):
    if x_name in config and isinstance(config[x_name], int | float) and config[x_name] != x_value:
        raise Refused(f"config[{x_name!r}] = {config[x_name]} disagrees with x_value = {x_value}")
    if mapping.adapt is not None:
        try:
            x_value, config = mapping.adapt(x_name, x_value, config)
        except Unmappable as exc:
            raise Refused(f"{kernel}: {exc}") from None
    missing = [key for key in mapping.requires if config.get(key) is None]
    if missing:
        raise Refused(
            f"{kernel}: the workload lacks {', '.join(missing)}, which {mapping.script}.py "
            "reads; it cannot be run without guessing"
        )
    for key, wanted in mapping.requires_values.items():
        if config.get(key) != wanted:
            raise Refused(f"{kernel}: config[{key!r}] must be {wanted!r}, not {config.get(key)!r}")
    return _size(x_value, "x_value"), config


def _function(mapping, metric) -> str:
    if mapping.setup:
        return mapping.setup
    return mapping.bench_speed if metric == "latency" else mapping.bench_memory


def _name(spec, key) -> str:
    value = spec.get(key)
    if not isinstance(value, str) or not NAME.match(value):
        raise Refused(f"{key} must be a name of letters, digits, '_', '.' or '-', not {value!r}")
    return value


def _choice(spec, key, choices) -> str:
    value = spec.get(key)
    if value not in choices:
        raise Refused(f"{key} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _size(value, what) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{what} must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0 or value > MAX_NUMBER:
        raise Refused(f"{what} must be a positive number below 2**40, not {value!r}")
    return int(value) if float(value).is_integer() else value


def _config(config) -> dict:
    if not isinstance(config, dict):
        raise Refused("config must be a JSON object of the workload's parameters")
    if len(config) > MAX_CONFIG_KEYS:
        raise Refused(f"config has {len(config)} keys; at most {MAX_CONFIG_KEYS} are accepted")
    checked = {}
    for key, value in config.items():
        if not isinstance(key, str) or not NAME.match(key):
            raise Refused(f"config key {key!r} is not a plain name")
        checked[key] = _config_value(key, value)
    if "dtype" in checked and checked["dtype"] not in DTYPES:
        raise Refused(f"config['dtype'] must be one of {', '.join(DTYPES)}, not {checked['dtype']!r}")
    return checked


def _config_value(key, value):
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise Refused(f"config[{key!r}] = {value!r} is not a finite number below 2**40")
        return value
    if isinstance(value, str) and NAME.match(value):
        if value.startswith("torch.") and value not in DTYPES:
            raise Refused(f"config[{key!r}] = {value!r} is not a dtype the harness accepts")
        return value
    raise Refused(f"config[{key!r}] must be a number, a boolean, null or a plain name, not {value!r}")


def gpu_slug(gpu_name: str) -> str:
    """A GPU model's slug, as the importer makes it ("NVIDIA A100-SXM4-80GB" ->
    "nvidia-a100-sxm4-80gb"): the same rule as Django's slugify, written here so that the harness
    and the kit need no Django (tests hold it equal to slugify); "cpu" for no GPU."""
    if not gpu_name or gpu_name == "CPU":
        return "cpu"
    text = unicodedata.normalize("NFKD", gpu_name).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"[-\s]+", "-", text).strip("-_")
