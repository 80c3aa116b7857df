"""Controlled runs: requesting rerun and measure jobs, claiming them on a GPU worker, recording
their results.

The evidence rule lives in one place, `rerun_record_result`: in the transaction that finishes a
job it sets `reproduced` on a rerun that agreed, or creates the `measured` run of a measure job.
Requesting, claiming, heartbeats, failures, divergence and reconciliation never touch the level.
"""

import hashlib
import hmac
import logging
import math
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from registry import digests
from registry.cache import generation_bump
from registry.importers import catalog, liger
from registry.models import (
    BenchmarkRun,
    Environment,
    EvidenceLevel,
    Implementation,
    JobKind,
    JobState,
    Kernel,
    Protocol,
    RerunJob,
    Source,
)
from registry.services.imports import groups_rerank
from registry.services.run_keys import RUN_KEY_SOURCES, run_keys_fill

logger = logging.getLogger(__name__)

CPU_SLUG = "cpu"
LOG_LIMIT = 64_000
SAMPLES_LIMIT = 20_000
EXECUTE_TASK = "registry.job_execute"
TORCH_DTYPES = {}
for _torch_name, _short in catalog.DTYPES.items():
    TORCH_DTYPES.setdefault(_short, _torch_name)

CONTROLLED_SOURCE = {
    "slug": "kernelindex-controlled",
    "name": "KernelIndex controlled runs",
    "url": "https://github.com/linkedin/Liger-Kernel/tree/main/benchmark/scripts",
    "license": "CC-BY-4.0",
    "license_url": "https://creativecommons.org/licenses/by/4.0/",
    "description": "Runs measured by KernelIndex's own workers: the upstream Liger-Kernel benchmark "
    "functions on exactly the recorded workload, with raw samples and the captured environment.",
}
_CONTROLLED_NOTE = (
    "Measured by a KernelIndex worker through the upstream Liger-Kernel benchmark functions. "
    "Comparable only with other KernelIndex controlled runs of the same kernel, workload, timed "
    "pass and GPU model."
)
CONTROLLED_PROTOCOLS = {
    ("cuda", "latency"): {
        "name": "KernelIndex controlled speed run",
        "timer": "CUDA events (triton.testing.do_bench)",
        "comparabilityFamily": "kernelindex/liger-do-bench-cuda-events",
    },
    ("cuda", "memory"): {
        "name": "KernelIndex controlled memory run",
        "timer": "torch.cuda.max_memory_allocated",
        "comparabilityFamily": "kernelindex/liger-peak-memory",
    },
    ("cpu", "latency"): {
        "name": "KernelIndex CPU wall clock",
        "timer": "CPU wall clock",
        "comparabilityFamily": "kernelindex/cpu-wall-clock",
    },
    ("cpu", "memory"): {
        "name": "KernelIndex CPU memory run",
        "timer": "CPU peak memory, as the harness measures it",
        "comparabilityFamily": "kernelindex/cpu-peak-memory",
    },
}
# Which captured version is the revision of a provider's project.
PROJECT_VERSIONS = {
    "Liger-Kernel": "liger_kernel",
    "Hugging Face Transformers": "transformers",
    "PyTorch": "torch",
    "PyTorch (torch.compile)": "torch",
}
SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton", "liger_kernel", "transformers", "python")


class JobRefused(Exception):
    """No job was created; the message says why, for the moderator."""


# Requesting ----------------------------------------------------------------------------------


@transaction.atomic
def rerun_request(
    *,
    run: BenchmarkRun,
    requested_by=None,
    reason: str = "",
    issue_report_pk: int | None = None,
) -> RerunJob:
    """Queue a rerun of `run` on its own GPU model. A run has at most one active rerun; a second
    request, even a concurrent one, is refused. The level does not change here."""
    active = RerunJob.objects.active().filter(kind=JobKind.RERUN, run=run).first()
    if active is not None:
        raise JobRefused(f"Run {run.pk} already has an active rerun: job #{active.pk} ({active.state}).")
    try:
        with transaction.atomic():
            job = RerunJob.objects.create(
                kind=JobKind.RERUN,
                run=run,
                kernel_id=run.kernel_id,
                workload_id=run.workload_id,
                provider=run.implementation.provider,
                operation_mode=run.operation_mode,
                metric=run.metric,
                gpu_slug=run.environment.slug,
                requested_by=requested_by,
                reason=reason,
                issue_report_pk=issue_report_pk,
                sent_at=timezone.now(),
            )
    except IntegrityError:
        # Another request for this run committed between our check and our insert.
        raise JobRefused(f"Run {run.pk} already has an active rerun.") from None
    _send_on_commit(job)
    generation_bump()  # the run page lists its queued rerun
    return job


@dataclass
class MeasureRequest:
    created: list[RerunJob] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@transaction.atomic
def measure_request(
    *,
    kernel: Kernel,
    providers: list[str],
    operation_modes: list[str],
    metrics: list[str],
    gpu_slug: str,
    workloads=None,
    requested_by=None,
    reason: str = "",
) -> MeasureRequest:
    """Queue one measure job per (workload, provider, pass, metric) that the registry already
    has a current run for, on the GPU model `gpu_slug`. A target with an active measure job on
    that GPU is skipped and named in the result."""
    targets = (
        BenchmarkRun.objects.current()
        .filter(
            kernel=kernel,
            implementation__provider__in=providers,
            operation_mode__in=operation_modes,
            metric__in=metrics,
        )
        .order_by("workload_id", "implementation__provider", "operation_mode", "metric")
        .values_list("workload_id", "implementation__provider", "operation_mode", "metric")
        .distinct()
    )
    if workloads is not None:
        targets = targets.filter(workload__in=workloads)
    targets = list(targets)
    if not targets:
        raise JobRefused(f"No current runs of {kernel.slug} match those implementations, passes and metrics.")
    outcome = MeasureRequest()
    for workload_id, provider, mode, metric in targets:
        try:
            with transaction.atomic():
                job = RerunJob.objects.create(
                    kind=JobKind.MEASURE,
                    kernel=kernel,
                    workload_id=workload_id,
                    provider=provider,
                    operation_mode=mode,
                    metric=metric,
                    gpu_slug=gpu_slug,
                    requested_by=requested_by,
                    reason=reason,
                    sent_at=timezone.now(),
                )
        except IntegrityError:
            outcome.skipped.append(f"workload {workload_id} {provider} {mode} {metric}: already queued")
            continue
        _send_on_commit(job)
        outcome.created.append(job)
    if outcome.created:
        generation_bump()
    return outcome


@transaction.atomic
def job_cancel(*, job: RerunJob) -> bool:
    """A queued job can be cancelled; a running one is left to finish (a worker cannot be
    stopped halfway without losing what it measured)."""
    cancelled = RerunJob.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
        state=JobState.CANCELLED, finished_at=timezone.now(), lease=""
    )
    if cancelled:
        generation_bump()
    return cancelled == 1


def _send_on_commit(job: RerunJob) -> None:
    # robust: a broker that is down must not undo the request; jobs_reconcile sends it again.
    transaction.on_commit(partial(job_send, job_id=job.pk, queue=job.queue), robust=True)


def job_send(
    *,
    job_id: int,
    queue: str,
    countdown: float | None = None,
    message: dict | None = None,
    connection=None,
) -> None:
    """Send the job's signed message to a GPU model's queue (no state change; the claim decides).
    `message` sends an already signed one on as it is (a worker passing on a job for another
    GPU holds no reason to sign anything); `connection` picks another broker than the
    configured one."""
    from kernelindex.celery import app

    if message is None:
        message = job_message(RerunJob.objects.select_related("kernel", "workload").get(pk=job_id))
    app.send_task(
        EXECUTE_TASK, args=[job_id], kwargs=message, queue=queue, countdown=countdown, connection=connection
    )


# Signed job messages. A GPU worker is less trusted than the web tier and the broker may be
# reachable from many sites: the worker runs only a spec that carries KernelIndex's signature,
# for the job id and GPU model it was issued for (an HMAC-SHA256 under JOB_SIGNING_KEY).


def job_message(job: RerunJob) -> dict:
    """The keyword arguments of the job's message: what to run, and the signature over it."""
    signed = {"job": job.pk, "gpu": job.gpu_slug, "spec": job_spec(job)}
    return {"signed": signed, "signature": _signature(signed)}


def job_message_check(*, job_id: int, signed, signature) -> str:
    """Why the message must not run, or "" when KernelIndex issued it for `job_id`."""
    if not isinstance(signed, dict) or not isinstance(signature, str) or not signature:
        return "the message carries no signed job spec"
    try:
        expected = _signature(signed)
    except (TypeError, ValueError):
        return "the signed part is not canonical JSON"
    if not hmac.compare_digest(expected, signature):
        return "the signature does not match the job spec"
    if signed.get("job") != job_id:
        return f"the signed spec is for job {signed.get('job')!r}, not job {job_id}"
    if not isinstance(signed.get("gpu"), str) or not isinstance(signed.get("spec"), dict):
        return "the signed part names no GPU model or spec"
    return ""


def _signature(signed: dict) -> str:
    key = settings.JOB_SIGNING_KEY.encode()
    return hmac.new(key, digests.canonical_bytes(signed), hashlib.sha256).hexdigest()


# On the worker --------------------------------------------------------------------------------


@dataclass
class Claim:
    """What job_claim found: `claimed` (run it, with this lease), `busy` (another attempt holds
    it and is alive), `wrong_gpu` (this worker must not run it) or `gone` (nothing to do)."""

    outcome: str
    lease: str = ""
    spec: dict | None = None
    queue: str = ""


@transaction.atomic
def job_claim(*, job_id: int, gpu_slug: str, worker_host: str, worker_gpu: str = "") -> Claim:
    """Take the job for one attempt: queued → running, or running → running again when the
    previous attempt's heartbeat is stale. The conditional update makes a second delivery of
    the same message find nothing to claim."""
    job = RerunJob.objects.select_related("kernel", "workload").filter(pk=job_id).first()
    if job is None or not job.is_active:
        return Claim("gone")
    if job.gpu_slug != gpu_slug:
        return Claim("wrong_gpu", queue=job.queue)
    now = timezone.now()
    claimable = Q(state=JobState.QUEUED) | _lost(now)
    if job.attempts >= settings.JOB_MAX_ATTEMPTS:
        gave_up = RerunJob.objects.filter(claimable, pk=job_id).update(
            state=JobState.FAILED,
            finished_at=now,
            lease="",
            error=f"Gave up after {job.attempts} attempts: the worker was lost each time.",
        )
        if gave_up:
            generation_bump()
        return Claim("gone" if gave_up else "busy")
    lease = uuid.uuid4().hex
    updated = RerunJob.objects.filter(claimable, pk=job_id).update(
        state=JobState.RUNNING,
        lease=lease,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        result_sent_at=None,
        started_at=now,
        worker_host=worker_host[:200],
        worker_gpu=worker_gpu[:200],
    )
    if updated != 1:
        still_running = RerunJob.objects.filter(pk=job_id, state=JobState.RUNNING).exists()
        return Claim("busy" if still_running else "gone")
    generation_bump()  # the run page shows the job running
    return Claim("claimed", lease=lease, spec=job_spec(job))


def job_spec(job: RerunJob) -> dict:
    """Exactly the job's workload, in the harness's terms (the upstream script's arguments)."""
    workload = job.workload
    config = dict(workload.parameters)
    x_value = config.pop(workload.x_name, workload.x_value)
    if workload.dtype:
        config["dtype"] = TORCH_DTYPES[workload.dtype]
    return {
        "kernel": job.kernel.slug,
        "provider": job.provider,
        "operation_mode": job.operation_mode,
        "metric": job.metric,
        "x_name": workload.x_name,
        "x_value": x_value,
        "config": config,
        "device": "cpu" if job.gpu_slug == CPU_SLUG else "cuda",
    }


def job_heartbeat(*, job_id: int, lease: str) -> bool:
    """The attempt holding `lease` is alive. False once the job is no longer its own."""
    return (
        RerunJob.objects.filter(pk=job_id, state=JobState.RUNNING, lease=lease).update(
            heartbeat_at=timezone.now()
        )
        == 1
    )


def job_result_sent(*, job_id: int, lease: str) -> bool:
    """The attempt holding `lease` has sent its result to the recorder: until JOB_RESULT_DEADLINE
    the job is waiting to be recorded, and neither the reconciler nor a second delivery takes it
    from that attempt, though its heartbeat has stopped. False once the job is no longer its own."""
    return (
        RerunJob.objects.filter(pk=job_id, state=JobState.RUNNING, lease=lease).update(
            result_sent_at=timezone.now()
        )
        == 1
    )


@transaction.atomic
def job_fail(*, job_id: int, error: str, lease: str | None = None, log: str = "") -> bool:
    """Mark an active job failed (for the attempt holding `lease`, when given). No level change."""
    jobs = RerunJob.objects.active().filter(pk=job_id)
    if lease is not None:
        jobs = jobs.filter(lease=lease)
    failed = jobs.update(
        state=JobState.FAILED, error=error[:LOG_LIMIT], log=bounded_log(log), finished_at=timezone.now()
    )
    if failed:
        generation_bump()
    return failed == 1


# Recording: the evidence rule -----------------------------------------------------------------


@transaction.atomic
def rerun_record_result(*, job_id: int, lease: str, result: dict) -> RerunJob | None:
    """Finish the job held by `lease` with the harness's result, in one transaction.

    The only code that changes an evidence level: a rerun whose median agrees with the recorded
    one within the tolerance makes the run `reproduced`; a measure job creates its run at
    `measured`. A failed harness, a disagreeing rerun (`diverged`) or a result from a stale
    attempt leaves every level as it was. Returns None when the job was not this attempt's."""
    job = (
        RerunJob.objects.select_for_update()
        .select_related("kernel", "workload")
        .filter(pk=job_id, state=JobState.RUNNING, lease=lease)
        .first()
    )
    if job is None:
        return None
    job.finished_at = timezone.now()
    job.environment = result.get("environment") or {}
    job.worker_gpu = str(job.environment.get("gpu_name") or job.worker_gpu)[:200]
    job.protocol = result.get("protocol") or {}
    job.log = bounded_log(result.get("log") or "")
    problem = _result_problem(job, result)
    if problem:
        job.state, job.error = JobState.FAILED, problem
    else:
        _result_store(job, result)
        if job.kind == JobKind.RERUN:
            _rerun_judge(job)
        else:
            job.result_run = _measured_run_create(job)
            job.state = JobState.SUCCEEDED
    job.save()
    generation_bump()  # the job's outcome, and perhaps a new level or a new measured run
    return job


def _result_problem(job: RerunJob, result: dict) -> str:
    status = result.get("status")
    if status != "ok":
        error = result.get("error") or "the harness gave no reason"
        return f"Harness {status or 'gave no status'}: {error}"[:LOG_LIMIT]
    if not isinstance(result.get("median"), int | float) or not math.isfinite(result["median"]):
        return "The harness reported no median."
    worker_gpu = (result.get("environment") or {}).get("gpu_slug")
    if worker_gpu and worker_gpu != job.gpu_slug:
        return f"Measured on {worker_gpu}, but the job is for {job.gpu_slug}."
    if job.kind == JobKind.RERUN and result.get("unit") and result["unit"] != job.run.unit:
        return f"The harness measured {result['unit']}, the run records {job.run.unit}."
    return ""


def _result_store(job: RerunJob, result: dict) -> None:
    samples = [float(s) for s in (result.get("samples") or [])][:SAMPLES_LIMIT]
    job.unit = result.get("unit") or (job.run.unit if job.run_id else "")
    job.median = float(result["median"])
    job.p20 = _float_or(result.get("p20"), job.median)
    job.p80 = _float_or(result.get("p80"), job.median)
    job.samples = samples
    job.ci_low, job.ci_high = median_interval(samples)
    job.error = ""


def _rerun_judge(job: RerunJob) -> None:
    run = BenchmarkRun.objects.select_for_update().get(pk=job.run_id)
    job.tolerance = rerun_tolerance(run)
    job.deviation = _relative_difference(job.median, run.median)
    if abs(job.deviation) <= job.tolerance:
        job.state = JobState.SUCCEEDED
        if run.evidence_level != EvidenceLevel.REPRODUCED:
            BenchmarkRun.objects.filter(pk=run.pk).update(
                evidence_level=EvidenceLevel.REPRODUCED, updated_at=timezone.now()
            )
    else:
        job.state = JobState.DIVERGED
        _divergence_report_open(job)


def _divergence_report_open(job: RerunJob) -> None:
    """Open an issue report for the moderators about a diverged rerun, inside the transaction
    that records the job. Filing a report never changes the run's evidence level."""
    from attestations.models import IssueReportCategory
    from attestations.services import issue_report_create

    issue_report_create(
        run=job.run,
        reporter=None,
        category=IssueReportCategory.WRONG_VALUE,
        description=(
            f"Controlled rerun job #{job.pk} on {job.worker_gpu or job.gpu_slug} measured a median of "
            f"{job.median:.6g} {job.unit}, {job.deviation:+.1%} from the recorded {job.run.median:.6g} "
            f"{job.run.unit}; the tolerance is ±{job.tolerance:.1%}. The run keeps its evidence level "
            "until a moderator looks into it."
        ),
    )


def rerun_tolerance(run: BenchmarkRun) -> float:
    """The larger of the RERUN_TOLERANCE setting and the recorded p20–p80 spread, both relative
    to the recorded median."""
    spread = _relative_difference(run.p80, run.p20, base=run.median) if run.median else 0.0
    return max(settings.RERUN_TOLERANCE, abs(spread))


def _relative_difference(value: float, reference: float, *, base: float | None = None) -> float:
    base = reference if base is None else base
    if base == 0:
        return 0.0 if value == reference else math.inf
    return (value - reference) / base


def median_interval(samples: list[float], z: float = 1.96) -> tuple[float | None, float | None]:
    """A distribution-free 95% interval of the median from order statistics; none under 6
    samples, where it would be the whole range."""
    n = len(samples)
    if n < 6:
        return None, None
    ordered = sorted(samples)
    half = z * math.sqrt(n) / 2
    # Ranks j = ⌊n/2 − z√n/2⌋ and k = ⌈1 + n/2 + z√n/2⌉, counted from 1.
    low = max(math.floor(n / 2 - half) - 1, 0)
    high = min(math.ceil(n / 2 + half), n - 1)
    return ordered[low], ordered[high]


def _float_or(value, default: float) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else default


def bounded_log(text: str) -> str:
    """Keep the start and the end of a long log: the command and the traceback."""
    if len(text) <= LOG_LIMIT:
        return text
    head, tail = LOG_LIMIT // 4, LOG_LIMIT - LOG_LIMIT // 4
    return f"{text[:head]}\n… [{len(text) - LOG_LIMIT} characters left out] …\n{text[-tail:]}"


# The measured run ------------------------------------------------------------------------------


def _measured_run_create(job: RerunJob) -> BenchmarkRun:
    source, _ = Source.objects.get_or_create(
        slug=CONTROLLED_SOURCE["slug"], defaults={k: v for k, v in CONTROLLED_SOURCE.items() if k != "slug"}
    )
    captured = job.environment
    implementation = _spec_row(Implementation, _implementation_spec(job, captured), kernel=job.kernel)
    protocol = _spec_row(Protocol, _protocol_spec(job))
    environment = _spec_row(Environment, _environment_spec(job, captured))
    run = _controlled_run_fields(job, captured, environment)
    run["manifest"] = _controlled_manifest(job, run, implementation, protocol, environment, source)
    run["digest"] = digests.digest(run["manifest"])
    created = BenchmarkRun.objects.create(
        source=source,
        kernel=job.kernel,
        implementation=implementation,
        workload=job.workload,
        protocol=protocol,
        environment=environment,
        evidence_level=EvidenceLevel.MEASURED,
        **run,
    )
    groups_rerank(keys=[created.comparison_key])
    run_keys_fill(runs=BenchmarkRun.objects.filter(pk=created.pk))
    created.refresh_from_db(fields=["rank", "group_size", *RUN_KEY_SOURCES])
    return created


def _spec_row(model, fields: dict, **extra):
    """Specs are content-addressed: the row with this digest, created the first time."""
    digest = digests.digest(fields["spec"])
    row, _ = model.objects.get_or_create(digest=digest, defaults={**fields, **extra})
    return row


def _implementation_spec(job: RerunJob, captured: dict) -> dict:
    spec = liger._implementation_spec(
        job.kernel.slug, job.provider, captured.get("liger_kernel") or "", job.workload.parameters
    )
    spec["revision"] = str(captured.get(PROJECT_VERSIONS.get(spec["project"], ""), "") or "")
    return {
        "provider": job.provider,
        "project": spec["project"],
        "project_url": spec["projectUrl"],
        "revision": spec["revision"],
        "description": spec["description"],
        "spec": spec,
    }


def _protocol_spec(job: RerunJob) -> dict:
    device = "cpu" if job.gpu_slug == CPU_SLUG else "cuda"
    base = CONTROLLED_PROTOCOLS[(device, job.metric)]
    spec = {
        **base,
        "harness": "Liger-Kernel benchmark scripts, run by a KernelIndex worker",
        "harnessRepository": catalog.LIGER_REPOSITORY,
        "statistic": "median",
        "notes": _CONTROLLED_NOTE,
        "settings": job.protocol,
    }
    return liger.protocol_fields(spec, slug=base["comparabilityFamily"].replace("/", "-"))


def _environment_spec(job: RerunJob, captured: dict) -> dict:
    if job.gpu_slug == CPU_SLUG:
        name = captured.get("gpu_name") or "CPU"
        vendor, product, form_factor, architecture = "", "CPU", "", captured.get("machine", "")
    else:
        name = captured.get("gpu_name") or job.gpu_slug
        vendor, product, form_factor, architecture = catalog.GPUS.get(name, (name.split()[0], name, "", ""))
    software = {key: str(captured[key]) for key in SOFTWARE_KEYS if captured.get(key)}
    spec = {
        "gpu": {"name": name},
        "vendor": vendor,
        "product": product,
        "formFactor": form_factor,
        "architecture": architecture,
        "software": software,
    }
    return {
        "slug": job.gpu_slug,
        "vendor": vendor,
        "product": product,
        "form_factor": form_factor,
        "architecture": architecture,
        "software": software,
        "spec": spec,
    }


def _controlled_run_fields(job: RerunJob, captured: dict, environment: dict) -> dict:
    observed_at = job.finished_at.replace(microsecond=0)
    family = CONTROLLED_PROTOCOLS[("cpu" if job.gpu_slug == CPU_SLUG else "cuda", job.metric)]
    pass_segment = job.operation_mode if job.metric == "latency" else f"{job.operation_mode}-{job.metric}"
    return {
        "operation_mode": job.operation_mode,
        "metric": job.metric,
        "unit": job.unit,
        "median": job.median,
        "p20": job.p20,
        "p80": job.p80,
        "source_metrics": {
            f"{job.unit}_20": job.p20,
            f"{job.unit}_50": job.median,
            f"{job.unit}_80": job.p80,
        },
        "observed_at": observed_at,
        "source_status": "not asserted",
        "correctness_note": "The harness times the upstream benchmark functions; it does not compare "
        "outputs with a reference.",
        "external_id": "/".join(
            [
                job.kernel.slug,
                pass_segment,
                job.provider,
                job.gpu_slug,
                job.workload.slug,
                f"{observed_at:%Y-%m-%d-%H-%M-%S}-job{job.pk}",
            ]
        ),
        "upstream_key": digests.digest(
            [job.kernel.slug, job.provider, job.operation_mode, job.metric, job.workload.digest, job.gpu_slug]
        ),
        "labels": {
            "job": job.pk,
            **({"liger_version": str(captured["liger_kernel"])} if captured.get("liger_kernel") else {}),
        },
        "comparison_key": digests.comparison_key(
            kernel=job.kernel.slug,
            operation_mode=job.operation_mode,
            metric=job.metric,
            workload_digest=job.workload.digest,
            family=family["comparabilityFamily"],
            gpu=environment.product,
        ),
    }


def _controlled_manifest(job, run, implementation, protocol, environment, source) -> dict:
    manifest = liger.build_manifest(
        run=run,
        kernel=job.kernel.slug,
        source={"name": source.name, "url": source.url, "license": source.license},
        implementation=(implementation.spec, implementation.digest),
        workload=(job.workload.spec, job.workload.digest),
        protocol=(protocol.spec, protocol.digest),
        environment=(environment.spec, environment.digest, environment.slug),
    )
    results = manifest["items"][0]["spec"]["results"]
    results["samples"] = job.samples
    if job.ci_low is not None:
        results["medianInterval95"] = [job.ci_low, job.ci_high]
    return manifest


# Reconciling ---------------------------------------------------------------------------------


@transaction.atomic
def jobs_reconcile(*, now=None) -> dict[str, int]:
    """Put running jobs whose worker stopped beating back to queued, fail those out of attempts,
    and send again queued jobs whose message may have been lost. Safe to run at any time and
    from several places: every change is a conditional update, and a duplicate message is
    harmless (the claim decides)."""
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    lost = _lost(now)
    for job in RerunJob.objects.filter(lost).only("pk", "attempts", "gpu_slug"):
        mine = RerunJob.objects.filter(lost, pk=job.pk)
        if job.attempts >= settings.JOB_MAX_ATTEMPTS:
            counts["failed"] += mine.update(
                state=JobState.FAILED,
                finished_at=now,
                lease="",
                error=f"Gave up after {job.attempts} attempts: the worker was lost each time.",
            )
        elif mine.update(
            state=JobState.QUEUED, lease="", heartbeat_at=None, result_sent_at=None, sent_at=now
        ):
            counts["requeued"] += 1
            _send_on_commit(job)
    unsent = RerunJob.objects.filter(
        state=JobState.QUEUED, sent_at__lt=now - timedelta(seconds=settings.JOB_RESEND_AFTER)
    )
    for job in unsent.only("pk", "gpu_slug"):
        if RerunJob.objects.filter(pk=job.pk, state=JobState.QUEUED).update(sent_at=now):
            counts["resent"] += 1
            _send_on_commit(job)
    if counts["requeued"] or counts["failed"]:
        generation_bump()  # a resend changes nothing a page shows
    return counts


def _lost(now) -> Q:
    """Running jobs whose attempt is taken as lost: no heartbeat for JOB_STALE_AFTER, and no
    result sent within JOB_RESULT_DEADLINE (a sent result waits to be recorded; `job_result_sent`)."""
    return Q(state=JobState.RUNNING, heartbeat_at__lt=now - timedelta(seconds=settings.JOB_STALE_AFTER)) & (
        Q(result_sent_at__isnull=True)
        | Q(result_sent_at__lt=now - timedelta(seconds=settings.JOB_RESULT_DEADLINE))
    )
