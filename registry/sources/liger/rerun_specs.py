"""What a controlled run measured by the rerun app's jobs is, as Liger's catalog describes it: the
jobs run Liger's workloads through Liger's own benchmark scripts (registry/reruns/harness/), so
its implementation and its GPU are named as the Liger importer names them. The rerun app reaches
this through the plug-in (`SourcePlugin.measured_fields`), never by importing it."""

from registry.sources.liger import importer

# Which captured version is the revision of a provider's project.
PROJECT_VERSIONS = {
    "Liger-Kernel": "liger_kernel",
    "Hugging Face Transformers": "transformers",
    "PyTorch": "torch",
    "PyTorch (torch.compile)": "torch",
}


def measured_fields(job, *, software: dict, on_cpu: bool) -> dict:
    """The Implementation and Environment rows' fields of the run a finished measure job made."""
    return {"implementation": _implementation(job), "environment": _environment(job, software, on_cpu)}


def _implementation(job) -> dict:
    captured = job.environment
    spec = importer.implementation_spec(
        job.kernel.slug, job.provider, captured.get("liger_kernel") or "", job.workload.parameters
    )
    spec["revision"] = str(captured.get(PROJECT_VERSIONS.get(spec["project"], ""), "") or "")
    return importer.implementation_fields(spec)


def _environment(job, software: dict, on_cpu: bool) -> dict:
    captured = job.environment
    if on_cpu:
        spec = {
            "gpu": {"name": captured.get("gpu_name") or "CPU"},
            "vendor": "",
            "product": "CPU",
            "formFactor": "",
            "architecture": captured.get("machine", ""),
            "software": software,
        }
    else:
        spec = importer.environment_spec(captured.get("gpu_name") or job.gpu_slug, software=software)
    return importer.environment_fields(spec, slug=job.gpu_slug)
