"""What a contributor's kit needs to reproduce one run: its spec (the job a rerun would run,
with the digests it rests on and the timing settings), what the machine must have, and how long
it will take, from the run's own figures. Read-only: the spec endpoint and the run page use it."""

from django.conf import settings
from django.urls import reverse

from registry.digests import digest
from registry.models import BenchmarkRun
from registry.reruns.harness import LIGER_KERNEL_VERSION, protocol_for
from registry.reruns.harness.spec import Refused, plan_for
from registry.reruns.judgement import run_measured_by
from registry.reruns.kit.result import SPEC_FORMAT
from registry.reruns.models import RerunJob
from registry.reruns.services.worker import job_device, job_spec

# Seconds a first run spends before it times anything: starting Python, importing torch,
# transformers and liger-kernel, and upstream's setup (measured on an H200, 2026-11-30: 1.3 to 2.7 s a workload once warm,
# 5 to 20 s for the first import; up to 8 s of setup for the fused-linear losses).
START_SECONDS = 30.0
MEMORY_PASSES = 10  # utils._test_memory runs the pass 10 times


def run_spec(run: BenchmarkRun) -> dict:
    """The part of the spec that its digest covers: the run (id and digest), the job the harness
    runs, the digests of what it hashes to, and the timing settings it is sampled under."""
    return {
        "format": SPEC_FORMAT,
        "run": {"id": run.pk, "digest": run.digest},
        "job": job_spec(RerunJob.rerun_of(run)),
        "digests": {
            "workload": run.workload.digest,
            "implementation": run.implementation.digest,
            "protocol": run.protocol.digest,
            "environment": run.environment.digest,
        },
        "timing": dict(settings.CONTROLLED_TIMING),
    }


def run_spec_digest(run: BenchmarkRun) -> str:
    return digest(run_spec(run))


def run_spec_document(run: BenchmarkRun, *, base_url: str) -> dict:
    """What /api/v1/runs/<id>/spec/ serves: the spec and its digest, plus what the kit shows and
    where it files the result. `base_url` is the site as the client reached it."""
    from registry.reruns.kit.build import kit_filename

    spec = run_spec(run)
    refusal = harness_refusal(spec["job"])
    base = base_url.rstrip("/")
    return {
        "format": SPEC_FORMAT,
        "specDigest": digest(spec),
        "spec": spec,
        "run": {
            "id": run.pk,
            "url": base + run.get_absolute_url(),
            "gpu": run.environment.slug,
            "gpuProduct": run.environment.product,
            "kernel": run.kernel.slug,
            "implementation": run.implementation.provider,
            "operationMode": run.operation_mode,
            "metric": run.metric,
            "workload": run.workload.summary,
            "unit": run.unit,
            "median": run.median,
            "p20": run.p20,
            "p80": run.p80,
            "comparabilityFamily": run.protocol.comparability_family,
        },
        "protocols": {
            device: protocol_for(device=device, metric=run.metric, timing=settings.CONTROLLED_TIMING)
            for device in ("cuda", "cpu")
        },
        "mappable": not refusal,
        "refusal": refusal,
        "estimate": reproduction_estimate(run, measure_job=run_measured_by(run)),
        "kit": {"filename": kit_filename(), "url": base + reverse("kit-file", args=[kit_filename()])},
        "uploadUrl": base + reverse("api-run-reproductions", args=[run.pk]),
    }


def harness_refusal(job: dict) -> str:
    try:
        plan_for(job)
    except Refused as exc:
        return str(exc)
    return ""


def reproduction_needs(run: BenchmarkRun, *, measure_job: RerunJob | None) -> dict:
    """What the contributor's machine needs, for the run page (`measure_job`: the job that
    measured the run, which the page has already read; None for a source's run)."""
    device = job_device(RerunJob.rerun_of(run))
    measured_torch = (measure_job.environment or {}).get("torch") if measure_job else ""
    return {
        "gpu": "any CPU (a CPU run)" if device == "cpu" else run.environment.product,
        "torch": (run.environment.software or {}).get("torch") or measured_torch or "",
        "harness": f"liger-kernel {LIGER_KERNEL_VERSION} source distribution",
        "estimate": reproduction_estimate(run, measure_job=measure_job),
    }


def reproduction_estimate(run: BenchmarkRun, *, measure_job: RerunJob | None) -> dict:
    """Seconds one reproduction takes: the measure job's own times when KernelIndex measured the
    run; otherwise from the recorded median and the timing settings."""
    spent = measure_job.sampling if measure_job else {}
    parts = ("setup_s", "upstream_s", "warmup_s", "timing_s")
    if measure_job and all(isinstance(spent.get(p), int | float) for p in parts):
        seconds = max(START_SECONDS, float(spent.get("process_start_s") or 0)) + sum(
            float(spent[p]) for p in parts
        )
        return {
            "seconds": round(seconds),
            "basis": f"the times of measure job #{measure_job.pk}, with a cold start",
        }
    timing = settings.CONTROLLED_TIMING
    if run.unit != "ms":
        return {
            "seconds": round(START_SECONDS + 30),
            "basis": f"{MEMORY_PASSES} passes for peak memory, with a cold start",
        }
    call_s = max(run.median, 0.0) / 1000
    sampling = min(timing["budget_s"], timing["min_samples"] * call_s)
    sampling = max(sampling, timing["check_every"] * call_s)  # at least one batch, budget or not
    upstream = max(
        0.125, 2 * call_s
    )  # upstream's do_bench: 25 ms warm-up and a 100 ms budget, at least one call
    seconds = START_SECONDS + upstream + timing["warmup_ms"] / 1000 + sampling
    return {
        "seconds": round(seconds),
        "basis": "the recorded median and the timing settings, with a cold start",
    }
