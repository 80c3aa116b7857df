"""Recording a job's result: the evidence rule.

The only code that changes an evidence level: in the transaction that finishes a job it sets
`reproduced` on a rerun that agreed, or creates the `measured` run of a measure job.
"""

import math

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import BenchmarkRun, EvidenceLevel, JobKind, JobState, RerunJob
from registry.reruns.services.measured_run import measured_run_from_job
from registry.reruns.services.worker import LOG_LIMIT, bounded_log

SAMPLES_LIMIT = 20_000


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
            job.result_run = measured_run_from_job(job=job)
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
