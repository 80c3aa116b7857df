"""KernelBench rows (history.Row) as content-addressed run records: the kernel is the problem,
the workload its problem file at the commit, the implementation eager or a torch.compile
configuration, the environment the row's own `hardware`. Nothing here touches the database."""

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from django.utils.text import slugify

from registry import digests
from registry.sources.kernelbench import problem as problem_file
from registry.sources.kernelbench import protocols
from registry.sources.kernelbench.history import Row

OPERATION_MODE = "no-grad-forward"
METRIC, UNIT = "latency", "ms"


@dataclass(frozen=True)
class KernelBenchRow:
    """What registry.services.imports' run writer needs of a row (as Liger's rows give it)."""

    kernel: dict
    implementation: dict
    workload: dict
    protocol: dict
    environment: dict
    run: dict
    manifest_json: str | None = None


def kernel_of(level: str, file: str) -> dict:
    number, words = problem_file.title_of(file)
    level_number = level.removeprefix("level")
    slug = slugify(f"kernelbench-l{level_number}-{number if number is not None else ''}-{words}")[:100]
    title = (
        f"KernelBench L{level_number} #{number}: {words}"
        if number is not None
        else f"KernelBench L{level_number}: {words}"
    )
    return {
        "slug": slug,
        "name": title[:200],
        "description": f"KernelBench level {level_number} problem {file} (its PyTorch reference).",
    }


def _spec_digest(spec: dict) -> str:
    return digests.digest(spec)


def workload_of(kernel: dict, row: Row, text: str | None) -> dict:
    read = problem_file.read(text) if text is not None else {"constants": {}, "tensors": []}
    parameters = {k: v for k, v in read["constants"].items() if not isinstance(v, str)}
    spec = {
        "kernel": kernel["slug"],
        "problem": {
            "level": row.level,
            "file": row.problem,
            "gitBlob": row.problem_blob,
            "sha256": digests.file_digest(text.encode("utf-8")) if text is not None else None,
        },
        "parameters": parameters,
        "tensors": read["tensors"],
        "dtype": "fp32",
    }
    shapes = ", ".join("[" + ", ".join(map(str, t["shape"])) + "]" for t in read["tensors"][:3])
    if text is None:
        summary = "problem file not in the repository at this commit"
    else:
        summary = f"{row.problem}" + (f" · inputs {shapes}" if shapes else "")
    return {
        "parameters": parameters,
        "tensors": read["tensors"],
        "dtype": "fp32",
        "x_name": "problem",
        "x_label": "problem file",
        "x_value": None,
        "slug": f"{row.level}-{(row.problem_blob or 'absent')[:12]}",
        "summary": summary[:300],
        "reference_asserted": False,
        "text": text or "",
        "spec": spec,
        "digest": _spec_digest(spec),
    }


def protocol_fields(host: str) -> dict:
    """The protocol as one host ran it: its comparability family names the host, so that a group
    holds one machine's eager and compile figures (two hosts of one GPU model are two groups, and
    each target has one current run)."""
    spec = {
        **protocols.PROTOCOL,
        "host": host,
        "comparabilityFamily": f"{protocols.PROTOCOL['comparabilityFamily']}/{host}",
    }
    return {
        **digests.protocol_row(spec, slug=slugify(f"kernelbench-reference-timing-{host}")[:100]),
        "digest": _spec_digest(spec),
    }


def environment_fields(hardware: str, *, software: dict | None = None) -> dict:
    spec = protocols.environment_spec(hardware, software=software)
    return {
        "slug": slugify(hardware),
        "vendor": spec["vendor"],
        "product": spec["product"],
        "form_factor": spec["formFactor"],
        "architecture": spec["architecture"],
        "software": spec["software"],
        "spec": spec,
        "digest": _spec_digest(spec),
    }


def implementation_fields(kernel: str, file_key: str, *, revision: str = "") -> dict:
    provider, backend, mode = protocols.configuration_of(file_key.rpartition("/")[2])
    spec = protocols.implementation_spec(kernel, provider, backend, mode)
    spec["revision"] = revision
    return {
        "provider": provider,
        "project": spec["project"],
        "project_url": spec["projectUrl"],
        "revision": revision,
        "description": spec["description"],
        "spec": spec,
        "digest": _spec_digest(spec),
    }


def upstream_key(row: Row) -> str:
    return digests.digest(list(row.key))


def _cached(cache: dict, key, make):
    if key not in cache:
        cache[key] = make()
    return cache[key]


def _kernel_and_workload(row: Row, text: str | None, cache: dict) -> tuple[dict, dict]:
    kernel = _cached(cache, ("kernel", row.level, row.problem), lambda: kernel_of(row.level, row.problem))
    workload = _cached(
        cache, ("workload", kernel["slug"], row.problem_blob), lambda: workload_of(kernel, row, text)
    )
    return kernel, workload


def row_value(row: Row, *, text: str | None, cache: dict) -> tuple[str, tuple]:
    """(upstream key, value) of a row: what the import compares with the last run of that key
    before it builds the row's records (build_row), which most rows of a version, unchanged
    since the version before, never need. The value is the published statistics and the
    workload's digest, as a run stores them."""
    _, workload = _kernel_and_workload(row, text, cache)
    return upstream_key(row), (row.mean, row.std, row.min, row.max, row.num_trials, workload["digest"])


def build_row(row: Row, *, commit: str, date: datetime, text: str | None, cache: dict) -> KernelBenchRow:
    """`cache` holds what many rows share (kernels, workloads, environments, implementations):
    each is made from its key alone, so one cache serves every version."""

    def cached(key, make):
        return _cached(cache, key, make)

    kernel, workload = _kernel_and_workload(row, text, cache)
    environment = cached(("environment", row.hardware), lambda: environment_fields(row.hardware))
    implementation = cached(
        ("implementation", kernel["slug"], row.file_key),
        lambda: implementation_fields(kernel["slug"], row.file_key),
    )
    host = protocols.host_of(row.file_key)
    protocol = cached(("protocol", host), lambda: protocol_fields(host))
    comparison_key = digests.comparison_key(
        kernel=kernel["slug"],
        operation_mode=OPERATION_MODE,
        metric=METRIC,
        workload_digest=workload["digest"],
        family=protocol["comparability_family"],
        gpu=environment["product"],
    )
    external_id = "/".join(
        [
            "kernelbench",
            row.level,
            row.problem.removesuffix(".py"),
            implementation["provider"],
            environment["slug"],
            host,
            commit[:12],
        ]
    )[:400]
    source_metrics = {
        "mean": row.mean,
        "std": row.std,
        "min": row.min,
        "max": row.max,
        "num_trials": row.num_trials,
    }
    run = {
        "operation_mode": OPERATION_MODE,
        "metric": METRIC,
        "unit": UNIT,
        # The columns hold the primary statistic, which is the mean here; p20 and p80 are not
        # published, so they equal it (the database's ordering check) and no page shows them.
        "median": row.mean,
        "p20": row.mean,
        "p80": row.mean,
        "source_metrics": source_metrics,
        "observed_at": date,
        "source_status": "passed",
        "correctness_note": "Timed by the source; a reference implementation is its own reference.",
        "external_id": external_id,
        "upstream_key": upstream_key(row),
        "labels": {"host": host, "timing_file": row.path, "device": row.device},
        "comparison_key": comparison_key,
    }
    manifest = manifest_of(run, kernel, implementation, workload, protocol, environment)
    canonical = digests.canonical_bytes(manifest)
    run["manifest"] = manifest
    run["digest"] = "sha256:" + hashlib.sha256(canonical).hexdigest()
    return KernelBenchRow(
        kernel=kernel,
        implementation=implementation,
        workload=workload,
        protocol=protocol,
        environment=environment,
        run=run,
    )


def manifest_of(
    run, kernel, implementation, workload, protocol, environment, *, source=None, results=None
) -> dict:
    """A run's canonical manifest. `results`: what it states as measured (default: the source's
    mean, std, min, max and trials, as it published them: the mean is primary)."""
    source = source or protocols.SOURCE
    metrics = run["source_metrics"]
    return digests.run_manifest(
        run={**run, "observed_at": run["observed_at"].astimezone(UTC)},
        kernel=kernel["slug"],
        source=source,
        implementation=(implementation["spec"], implementation["digest"]),
        workload=(workload["spec"], workload["digest"]),
        protocol=(protocol["spec"], protocol["digest"]),
        environment=(environment["spec"], environment["digest"], environment["slug"]),
        results=results
        or {
            "statistic": "mean",
            "mean": metrics["mean"],
            "std": metrics["std"],
            "min": metrics["min"],
            "max": metrics["max"],
            "numTrials": metrics["num_trials"],
        },
    )
