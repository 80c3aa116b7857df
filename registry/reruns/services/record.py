"""Recording a job's result: the evidence rule.

The only code that changes an evidence level: in the transaction that finishes a job it sets
`reproduced` on a rerun that agreed on another card, or creates the `measured` run of a measure
job; and, when a finished rerun is judged again under today's statistics (`rerun_rejudge`), it
keeps `reproduced` only while one of the run's reruns agrees on another card.
"""

import math

from django.db import transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import BenchmarkRun, EvidenceLevel, JobKind, JobState, RerunJob, Verdict
from registry.reruns.harness import stats
from registry.reruns.judgement import SAMPLES_LIMIT, judgement_note, run_judgement
from registry.reruns.services.ceilings import CeilingRejected, ceiling_fields, measured_ceiling_create
from registry.reruns.services.measured_run import CONTROLLED_SOURCE, measured_run_from_job
from registry.reruns.services.worker import LOG_LIMIT, bounded_log
from registry.services.changes import changes_detect


@transaction.atomic
def rerun_record_result(*, job_id: int, lease: str, result: dict) -> RerunJob | None:
    """Finish the job held by `lease` with the harness's result, in one transaction.

    The only code that changes an evidence level: a rerun whose verdict is `agrees`, on another
    card than the measurement's, makes the run `reproduced`; a measure job creates its run at
    `measured`. A failed harness, an `inconclusive` or `disagrees` verdict (the job `diverged`) or
    a result from a stale attempt leaves every level as it was. Returns None when the job was not
    this attempt's."""
    job = (
        # of=self: a ceilings job has no kernel or workload, so those joins are outer ones, which
        # PostgreSQL cannot lock; the job's row is the one that needs it.
        RerunJob.objects.select_for_update(of=("self",))
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
        job.timed_out = result.get("timed_out") is True
    else:
        _result_store(job, result)
        if job.kind == JobKind.RERUN:
            _rerun_judge(job)
        elif job.kind == JobKind.CEILINGS:
            measured_ceiling_create(document=result.get("ceilings") or {}, job=job)
            job.state = JobState.SUCCEEDED
        else:
            job.result_run = measured_run_from_job(job=job)
            job.state = JobState.SUCCEEDED
    job.save()
    if job.result_run_id:
        # A new value of its series: the step from the previous one is judged now (with the
        # measure job's samples saved above), as an import judges the steps it adds.
        changes_detect(runs=BenchmarkRun.objects.filter(pk=job.result_run_id))
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
    if job.kind == JobKind.CEILINGS:
        try:
            ceiling_fields(result.get("ceilings") or {})
        except CeilingRejected as exc:
            return f"The ceilings measurement cannot be recorded: {exc}."
    return ""


def _result_store(job: RerunJob, result: dict) -> None:
    samples = [float(s) for s in (result.get("samples") or [])][:SAMPLES_LIMIT]
    job.unit = result.get("unit") or (job.run.unit if job.run_id else "")
    job.median = float(result["median"])
    job.p20 = _float_or(result.get("p20"), job.median)
    job.p80 = _float_or(result.get("p80"), job.median)
    job.samples = samples
    job.ci_low, job.ci_high = stats.median_interval(samples) or (None, None)
    job.upstream = _figures(result.get("upstream"))
    job.gpu_uuid = str(result.get("gpu_uuid") or job.gpu_uuid)[:64]  # else the card of the claim
    job.gpu_state = result.get("gpu_state") if isinstance(result.get("gpu_state"), dict) else {}
    job.sampling = result.get("sampling") if isinstance(result.get("sampling"), dict) else {}
    job.error = ""


def _rerun_judge(job: RerunJob) -> None:
    """The verdict on a rerun (`run_judgement`); a disagreeing one diverges and opens a report,
    an agreeing one on another card (or one whose card is not known) makes the run `reproduced`."""
    run = BenchmarkRun.objects.select_for_update().select_related("protocol").get(pk=job.run_id)
    _judgement_store(job, run)
    if job.verdict == Verdict.DISAGREES:
        _divergence_report_open(job)
    elif job.raises_level and run.evidence_level != EvidenceLevel.REPRODUCED:
        BenchmarkRun.objects.filter(pk=run.pk).update(
            evidence_level=EvidenceLevel.REPRODUCED, updated_at=timezone.now()
        )


JUDGEMENT_FIELDS = ("verdict", "deviation", "deviation_low", "deviation_high", "tolerance", "verdict_note")


@transaction.atomic
def rerun_rejudge(*, job_id: int) -> tuple[str, str] | None:
    """Judge a finished rerun again, from the samples it keeps, under today's statistics and
    tolerance (`run_judgement`), in one transaction; returns (verdict before, verdict now), or
    None for a job without a verdict (unfinished, failed, or judged before verdicts existed).

    A judgement that comes out the same keeps the job as it is, so running it twice is safe; the
    run's level is settled by the rule either way (it changes when the rule did). Otherwise
    the judgement it had is kept in `sampling["earlier_judgements"]`, and the run's level follows
    the evidence rule: `reproduced` while one of its reruns agrees on another card (or one not
    known to be the same), else the level it has without one (`measured` for a controlled run,
    `reported` for a source's). A rerun that comes to disagree diverges and opens an issue report,
    as when it was recorded; one that no longer disagrees leaves its report to the moderators."""
    job = (
        RerunJob.objects.select_for_update(of=("self",))
        .filter(pk=job_id, kind=JobKind.RERUN, state__in=(JobState.SUCCEEDED, JobState.DIVERGED))
        .exclude(verdict="")
        .first()
    )
    if job is None:
        return None
    run = BenchmarkRun.objects.select_for_update().select_related("protocol", "source").get(pk=job.run_id)
    before = {name: getattr(job, name) for name in JUDGEMENT_FIELDS}
    _judgement_store(job, run)
    if any(getattr(job, name) != value for name, value in before.items()):
        earlier = [
            *job.sampling.get("earlier_judgements", []),
            {**before, "judged_at": timezone.now().isoformat()},
        ]
        job.sampling = {**job.sampling, "earlier_judgements": earlier}
        job.save(update_fields=[*JUDGEMENT_FIELDS, "state", "sampling"])
        if job.verdict == Verdict.DISAGREES and before["verdict"] != Verdict.DISAGREES:
            _divergence_report_open(job)
    reruns = RerunJob.objects.filter(run=run, kind=JobKind.RERUN).exclude(pk=job.pk)
    if job.raises_level or any(rerun.raises_level for rerun in reruns.filter(verdict=Verdict.AGREES)):
        level = EvidenceLevel.REPRODUCED
    elif run.source.slug == CONTROLLED_SOURCE["slug"]:
        level = EvidenceLevel.MEASURED
    else:
        level = EvidenceLevel.REPORTED
    if level != run.evidence_level:
        BenchmarkRun.objects.filter(pk=run.pk).update(evidence_level=level, updated_at=timezone.now())
    if level != run.evidence_level or job.verdict != before["verdict"]:
        generation_bump()
    return before["verdict"], job.verdict


def _judgement_store(job: RerunJob, run: BenchmarkRun) -> None:
    """Set the rerun's verdict, its interval and its state from `run_judgement`."""
    judged = run_judgement(
        run, samples=job.samples, upstream=job.upstream, figures=(job.median, job.p20, job.p80)
    )
    measured_by, basis = judged.measured_by, judged.basis
    job.tolerance = judged.tolerance
    job.deviation, job.deviation_low, job.deviation_high = judged.deviation, judged.low, judged.high
    job.verdict = judged.verdict
    same_gpu = bool(measured_by and measured_by.gpu_uuid and measured_by.gpu_uuid == job.gpu_uuid)
    job.sampling = {
        **job.sampling,
        "basis": basis,
        "same_gpu": same_gpu if measured_by and measured_by.gpu_uuid and job.gpu_uuid else None,
    }
    job.verdict_note = judgement_note(judged, subject="Rerun")
    job.state = JobState.DIVERGED if job.verdict == Verdict.DISAGREES else JobState.SUCCEEDED


def _figures(value) -> dict:
    if not isinstance(value, dict):
        return {}
    figures = {k: float(value[k]) for k in ("median", "p20", "p80") if isinstance(value.get(k), int | float)}
    return figures if len(figures) == 3 and all(math.isfinite(v) for v in figures.values()) else {}


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
            f"{job.run.unit}; {job.verdict_note} The run keeps its evidence level until a moderator "
            "looks into it."
        ),
    )


def _float_or(value, default: float) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else default
