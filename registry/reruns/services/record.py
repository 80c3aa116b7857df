"""Recording a job's result: the evidence rule.

The only code that changes an evidence level: in the transaction that finishes a job it sets
`reproduced` on a rerun that agreed on another card, or creates the `measured` run of a measure
job; and, when a finished rerun is judged again under today's statistics (`rerun_rejudge`), it
keeps `reproduced` only while one of the run's reruns agrees on another card. Jobs that finished
elsewhere (a GPU host's sweep file) are written many at once (`finished_jobs_create`), each rerun
judged by the same functions, in the order that recording them one at a time would judge them.
"""

import logging
import math
from collections import Counter, defaultdict

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import BenchmarkRun, EvidenceLevel, Verdict
from registry.reruns.harness.job_result import JobResult
from registry.reruns.judgement import SAMPLES_LIMIT, UNREAD, judgement_note, judgement_rule, run_judgement
from registry.reruns.models import JobKind, JobState, RerunJob, raises_level
from registry.reruns.services.measured_ceilings import (
    CeilingRejected,
    ceiling_fields,
    measured_ceiling_create,
)
from registry.reruns.services.measured_run import CONTROLLED_SOURCE, measured_run_from_job
from registry.reruns.services.worker import CPU_SLUG, LOG_LIMIT, bounded_log
from registry.rows import rows_update
from registry.services.changes import changes_detect
from registry.stats import medians

logger = logging.getLogger(__name__)


@transaction.atomic
def rerun_record_result(*, job_id: int, lease: str, result: dict, worker_key=None) -> RerunJob | None:
    """Finish the job held by `lease` with the harness's result, in one transaction.

    The only code that changes an evidence level: a rerun whose verdict is `agrees`, on another
    card than the measurement's, makes the run `reproduced`; a measure job creates its run at
    `measured`. A failed harness, an `inconclusive` or `disagrees` verdict (the job `diverged`) or
    a result from a stale attempt leaves every level as it was. Returns None when the job was not
    this attempt's.

    `worker_key` (a GPU worker's signed result, services.worker_keys): the result counts only for
    the attempt granted to that key's worker, of the key's GPU model, from the card of the claim,
    registered for that key; otherwise nothing is written and None is returned."""
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
    result = JobResult.from_wire(result)
    if worker_key is not None:
        refusal = _attempt_refusal(job, worker_key, result)
        if refusal:
            logger.error("Result for job %s refused: %s", job_id, refusal)
            return None
    if not job_result_apply(job, result):
        if job.kind == JobKind.RERUN:
            _rerun_judge(job)
        elif job.kind == JobKind.CEILINGS:
            measured_ceiling_create(document=result.ceilings or {}, job=job)
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


def job_result_apply(job: RerunJob, result: JobResult) -> str:
    """Finish `job` in memory with the harness's result: when, where and how it ran, then its
    figures, or its failure (state `failed`); returns the problem that failed it, or "". A job
    that did not fail is judged next, by its kind (a rerun: `_judgement_store`)."""
    job.finished_at = timezone.now()
    job.environment = result.environment or {}
    job.worker_gpu = str(job.environment.get("gpu_name") or job.worker_gpu)[:200]
    job.protocol = result.protocol or {}
    job.log = bounded_log(result.log or "")
    problem = _result_problem(job, result)
    if problem:
        job.state, job.error = JobState.FAILED, problem
        job.timed_out = result.timed_out is True
    else:
        _result_store(job, result)
    return problem


def _attempt_refusal(job: RerunJob, key, result: JobResult) -> str:
    """Why a worker's signed result must not be recorded for this running attempt, or ""."""
    card = str(result.gpu_uuid or "")
    if job.worker_host != key.name:
        return f"the attempt was granted to {job.worker_host!r}, not to {key.name!r}"
    if key.gpu_slug != job.gpu_slug:
        return f"worker key {key.name!r} is for {key.gpu_slug}, the job for {job.gpu_slug}"
    if card != job.gpu_uuid:
        return f"the result names card {card or '(none)'}, the claim card {job.gpu_uuid or '(none)'}"
    if card not in key.cards and not (key.gpu_slug == "cpu" and card == ""):
        return f"card {card or '(none)'} is not registered for worker key {key.name!r}"
    return ""


def _result_problem(job: RerunJob, result: JobResult) -> str:
    status = result.status
    if status != "ok":
        error = result.error or "the harness gave no reason"
        return f"Harness {status or 'gave no status'}: {error}"[:LOG_LIMIT]
    if not isinstance(result.median, int | float) or not math.isfinite(result.median):
        return "The harness reported no median."
    worker_gpu = (result.environment or {}).get("gpu_slug")
    if worker_gpu and worker_gpu != job.gpu_slug:
        return f"Measured on {worker_gpu}, but the job is for {job.gpu_slug}."
    if job.kind == JobKind.RERUN and result.unit and result.unit != job.run.unit:
        return f"The harness measured {result.unit}, the run records {job.run.unit}."
    if job.kind == JobKind.CEILINGS:
        try:
            ceiling_fields(result.ceilings or {})
        except CeilingRejected as exc:
            return f"The ceilings measurement cannot be recorded: {exc}."
    return ""


def _result_store(job: RerunJob, result: JobResult) -> None:
    samples = [float(s) for s in (result.samples or [])][:SAMPLES_LIMIT]
    job.unit = result.unit or (job.run.unit if job.run_id else "")
    job.median = float(result.median)
    job.p20 = _float_or(result.p20, job.median)
    job.p80 = _float_or(result.p80, job.median)
    job.samples = samples
    job.ci_low, job.ci_high = medians.median_interval(samples) or (None, None)
    job.upstream = _figures(result.upstream)
    job.judged_interval_set()
    job.gpu_uuid = str(result.gpu_uuid or job.gpu_uuid)[:64]  # else the card of the claim
    job.gpu_state = result.gpu_state if isinstance(result.gpu_state, dict) else {}
    job.sampling = result.sampling if isinstance(result.sampling, dict) else {}
    if isinstance(job.sampling.get("sample_blocks"), list):  # each kept sample's block id, no more
        job.sampling["sample_blocks"] = job.sampling["sample_blocks"][: len(samples)]
    job.error = ""


def _rerun_judge(job: RerunJob) -> None:
    """The verdict on a rerun (`run_judgement`); a disagreeing one diverges and opens a report.
    The run's level then follows the one evidence rule (`run_level_settle`), over its reruns as
    stored, this one included: an agreeing rerun on another card makes it `reproduced`."""
    run = (
        BenchmarkRun.objects.select_for_update(of=("self",))
        .select_related("protocol", "source", "kernel", "environment")
        .get(pk=job.run_id)
    )
    _judgement_store(job, run)
    if job.verdict == Verdict.DISAGREES:
        _divergence_report_open(job)
    run_level_settle(run=run, reason=f"Rerun job #{job.pk} recorded.", judged=job)


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
    as when it was recorded; one that no longer disagrees leaves its report to the moderators.
    `reruns_rejudge` does the same for every rerun, a chunk of runs at a time."""
    job = (
        RerunJob.objects.select_for_update(of=("self",))
        .filter(pk=job_id, kind=JobKind.RERUN, state__in=(JobState.SUCCEEDED, JobState.DIVERGED))
        .exclude(verdict="")
        .first()
    )
    if job is None:
        return None
    run = (
        BenchmarkRun.objects.select_for_update(of=("self",))
        .select_related("protocol", "source", "kernel", "environment")
        .get(pk=job.run_id)
    )
    before = {name: getattr(job, name) for name in JUDGEMENT_FIELDS}
    stamp = job.judged_under
    _judgement_store(job, run)
    if _judgement_changed(job, before):
        diverged = _earlier_judgement_keep(job, before, timezone.now())
        job.save(update_fields=[*JUDGEMENT_FIELDS, "state", "sampling", "judged_under"])
        if diverged:
            _divergence_report_open(job)
    elif job.judged_under != stamp:  # judged the same: only a new stamp to write, if any
        job.save(update_fields=["judged_under"])
    changed = run_level_settle(run=run, reason=f"Rerun job #{job.pk} judged again.")
    if changed or job.verdict != before["verdict"]:
        generation_bump()
    return before["verdict"], job.verdict


@transaction.atomic
def run_level_settle(*, run: BenchmarkRun, reason: str, judged: RerunJob | None = None) -> bool:
    """Set `run`'s evidence level to what its reruns show under today's rule (models.raises_level):
    `reproduced` with an agreeing rerun on another card, else `measured` for a controlled run and
    `reported` for a source's. A change is audited (KernelIndex as the actor, with `reason`).
    Returns whether the level changed; running it twice changes nothing the second time.
    `judged`: a rerun of `run` judged in this transaction and not yet saved, counted as judged."""

    # The three fields the rule reads, not the rows: a run's agreeing reruns carry their samples.
    reruns = RerunJob.objects.filter(run=run, kind=JobKind.RERUN, verdict=Verdict.AGREES)
    if judged is not None:
        reruns = reruns.exclude(pk=judged.pk)
    stored = reruns.values_list("verdict", "sampling", "gpu_slug")
    if judged is not None:
        stored = [*stored, (judged.verdict, judged.sampling, judged.gpu_slug)]
    level = evidence_level_due(run=run, reruns=stored)
    if level == run.evidence_level:
        return False
    BenchmarkRun.objects.filter(pk=run.pk).update(evidence_level=level, updated_at=timezone.now())
    _level_audit(run, run.evidence_level, level, reason).save()
    run.evidence_level = level
    return True


LEVEL_AUDIT_ACTION = "evidence_level_settled"


def _level_audit(run: BenchmarkRun, before: str, after: str, reason: str):
    """The audit entry, unsaved, of a run's evidence level settled by the rule (KernelIndex as
    the actor)."""
    from attestations.models import AuditEntry

    return AuditEntry(
        actor=None,
        content_type=ContentType.objects.get_for_model(BenchmarkRun),
        object_id=run.pk,
        object_repr=str(run)[:200],
        action=LEVEL_AUDIT_ACTION,
        from_state=before,
        to_state=after,
        reason=reason,
    )


REJUDGE_CHUNK = 250  # runs whose reruns are judged again in one transaction


def reruns_rejudge(*, gpu: str = "", kernel: str = "", every: bool = True) -> Counter:
    """Judge every finished rerun with a verdict again, leaving what `rerun_rejudge` for each in
    turn (in pk order) would leave: the same judgements, earlier judgements kept, levels, audit
    entries (each at the same job) and issue reports. A run's judgements and level depend only on
    the run, its measure job and its own reruns, so the runs are taken REJUDGE_CHUNK at a time,
    each chunk in one transaction (_runs_rejudge); returns how many went from each verdict to
    each. `rejudge_reruns` and `load_bundled_data` (after the shipped runs load, so that a fresh
    database shows today's verdicts) call this. Killed halfway, the chunks done stay done and a
    second call finds them judged; a load of unchanged data writes nothing.

    `every=False` passes over the reruns already judged under today's rule (`judged_under`,
    judgement.judgement_rule): judged again they would come out the same, so a second load of
    unchanged data judges none; a change to the judging code, a verdict model or the tolerance
    makes every rerun due again."""
    jobs = RerunJob.objects.filter(
        kind=JobKind.RERUN, state__in=(JobState.SUCCEEDED, JobState.DIVERGED)
    ).exclude(verdict="")
    if not every:
        jobs = jobs.exclude(judged_under=judgement_rule())
    if gpu:
        jobs = jobs.filter(gpu_slug=gpu)
    if kernel:
        jobs = jobs.filter(kernel__slug=kernel)
    run_ids = sorted(set(jobs.values_list("run_id", flat=True)))
    changes = Counter()
    for start in range(0, len(run_ids), REJUDGE_CHUNK):
        changes += _runs_rejudge(jobs, run_ids[start : start + REJUDGE_CHUNK])
    return changes


@transaction.atomic
def _runs_rejudge(jobs, run_ids: list[int]) -> Counter:
    """The reruns of `jobs` of these runs judged again in one transaction, jobs and runs locked
    (in the recorder's order: jobs, then runs), judged in memory and written at once: the jobs
    whose judgement changed (their earlier one kept in `sampling["earlier_judgements"]`), a
    report for each that comes to disagree, and each run's level followed as settling it after
    every job in turn would leave it, an audit entry at each job where it changes."""
    from attestations.models import AuditEntry

    mine = list(jobs.filter(run_id__in=run_ids).select_for_update(of=("self",)).order_by("pk"))
    runs = {
        run.pk: run
        for run in BenchmarkRun.objects.select_for_update(of=("self",))
        .filter(pk__in=run_ids)
        .select_related("protocol", "source", "kernel", "environment")
    }
    measured_by = _measure_jobs_of(run_ids)
    levels = _LevelsFollowed(runs)
    changes, changed_jobs, diverged, audits = Counter(), [], [], []
    shown = False  # a verdict or a level a page shows has changed
    now, rule = timezone.now(), judgement_rule()
    # Read before judging, which stamps each job in memory: a chunk judged the same under the
    # same rule then sends no UPDATE at all (a load of unchanged data writes nothing).
    stamped = {job.pk for job in mine if job.judged_under == rule}
    for job in mine:
        run = runs[job.run_id]
        before = {name: getattr(job, name) for name in JUDGEMENT_FIELDS}
        _judgement_store(job, run, measured_by=measured_by.get(run.pk))
        if _judgement_changed(job, before):
            changed_jobs.append(job)
            if _earlier_judgement_keep(job, before, now):
                diverged.append(job)
            levels.rerun_judged(job, key=job.pk)
        change = levels.settle(run.pk)
        if change:
            audits.append(_level_audit(run, *change, f"Rerun job #{job.pk} judged again."))
            shown = True
        shown |= job.verdict != before["verdict"]
        changes[before["verdict"], job.verdict] += 1
    rows_update(changed_jobs, [*JUDGEMENT_FIELDS, "state", "sampling", "judged_under"])
    # The rest judged the same: only their stamp is new, where they had another.
    written = stamped | {job.pk for job in changed_jobs}
    RerunJob.objects.filter(pk__in=[job.pk for job in mine if job.pk not in written]).update(
        judged_under=rule
    )
    for job in diverged:
        _divergence_report_open(job)
    levels.write(now)
    AuditEntry.objects.bulk_create(audits, batch_size=500)
    if shown:
        generation_bump()
    return changes


def _measure_jobs_of(run_ids) -> dict[int, RerunJob]:
    """Each run's measure job (`run_measured_by`: its first), for many runs in one query."""
    measured_by = {}
    for measure in RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=run_ids).order_by("pk"):
        measured_by.setdefault(measure.result_run_id, measure)
    return measured_by


class _LevelsFollowed:
    """The levels of many runs followed in memory as `run_level_settle` after each of their
    reruns in turn would leave them: each run's agreeing reruns as stored, then as each rerun is
    judged (the three fields the rule reads), and its level as settled so far."""

    def __init__(self, runs: dict[int, BenchmarkRun]):
        self.runs = runs
        self.level = {pk: run.evidence_level for pk, run in runs.items()}
        self.agreeing = defaultdict(dict)  # run pk -> {job key: what evidence_level_due reads of it}
        stored = RerunJob.objects.filter(run__in=list(runs), kind=JobKind.RERUN, verdict=Verdict.AGREES)
        for pk, run_id, *fields in stored.values_list("pk", "run_id", "verdict", "sampling", "gpu_slug"):
            self.agreeing[run_id][pk] = fields

    def rerun_judged(self, job: RerunJob, *, key) -> None:
        """`job`, a rerun of one of the runs, is judged as it now stands (`key`: its pk, or for a
        job not saved yet anything else that names it)."""
        self.agreeing[job.run_id].pop(key, None)
        if job.verdict == Verdict.AGREES:
            self.agreeing[job.run_id][key] = [job.verdict, job.sampling, job.gpu_slug]

    def settle(self, run_id: int) -> tuple[str, str] | None:
        """The run's level under the rule now: (before, after) where it changes, else None."""
        due = evidence_level_due(run=self.runs[run_id], reruns=self.agreeing[run_id].values())
        before, self.level[run_id] = self.level[run_id], due
        return (before, due) if due != before else None

    def write(self, now) -> None:
        """Each run that ends at another level than it had, updated (as `run_level_settle` does)."""
        moved = defaultdict(list)  # level -> the runs that end at it, from another
        for pk, due in self.level.items():
            if due != self.runs[pk].evidence_level:
                moved[due].append(pk)
        for due, pks in moved.items():
            BenchmarkRun.objects.filter(pk__in=pks).update(evidence_level=due, updated_at=now)


@transaction.atomic
def finished_jobs_create(*, jobs: list[RerunJob]) -> None:
    """Write jobs that finished elsewhere (a GPU host's sweep, recorded from its file) in bulk, in
    their order, so that they take the primary keys that creating them one at a time would give.
    The reruns among them, their results stored by `job_result_apply` and their runs already in the
    registry, are judged as `rerun_record_result` would judge each in turn: the same verdict, a
    report for each that disagrees, and their runs' levels settled by the one rule after each,
    audited at the rerun that changes one. A measure job's run is its caller's to create."""
    from attestations.models import AuditEntry

    reruns = [job for job in jobs if job.kind == JobKind.RERUN and job.state != JobState.FAILED]
    run_ids = sorted({job.run_id for job in reruns})
    runs = (
        BenchmarkRun.objects.select_for_update(of=("self",))
        .select_related("protocol", "source", "kernel", "environment")
        .in_bulk(run_ids)
    )
    measured_by, levels, settled = _measure_jobs_of(run_ids), _LevelsFollowed(runs), []
    for job in reruns:
        job.run = runs[job.run_id]
        _judgement_store(job, job.run, measured_by=measured_by.get(job.run_id))
        levels.rerun_judged(job, key=id(job))
        settled.append(levels.settle(job.run_id))
    RerunJob.objects.bulk_create(jobs, batch_size=500)
    audits = []
    for job, change in zip(reruns, settled, strict=True):
        if job.verdict == Verdict.DISAGREES:
            AuditEntry.objects.bulk_create(audits)  # the entries before the report's, in order
            audits = []
            _divergence_report_open(job)
        if change:
            audits.append(_level_audit(job.run, *change, f"Rerun job #{job.pk} recorded."))
    AuditEntry.objects.bulk_create(audits, batch_size=500)
    levels.write(timezone.now())
    generation_bump()


def _judgement_changed(job: RerunJob, before: dict) -> bool:
    return any(getattr(job, name) != value for name, value in before.items())


def _earlier_judgement_keep(job: RerunJob, before: dict, at) -> bool:
    """Keep the judgement a rerun had (`before`) in `sampling["earlier_judgements"]` once it is
    judged anew; returns whether it has come to disagree (a divergence, to be reported)."""
    earlier = [*job.sampling.get("earlier_judgements", []), {**before, "judged_at": at.isoformat()}]
    job.sampling = {**job.sampling, "earlier_judgements": earlier}
    return job.verdict == Verdict.DISAGREES and before["verdict"] != Verdict.DISAGREES


def evidence_level_due(*, run: BenchmarkRun, reruns) -> str:
    """The evidence rule: the level `run` has under today's rule, given the (verdict, sampling,
    gpu_slug) of its reruns as stored (models.raises_level)."""
    if any(raises_level(verdict, sampling, on_gpu=gpu != CPU_SLUG) for verdict, sampling, gpu in reruns):
        return EvidenceLevel.REPRODUCED
    if run.source.slug == CONTROLLED_SOURCE["slug"]:
        return EvidenceLevel.MEASURED
    return EvidenceLevel.REPORTED


def _judgement_store(job: RerunJob, run: BenchmarkRun, *, measured_by=UNREAD) -> None:
    """Set the rerun's verdict, its interval and its state from `run_judgement`."""
    judged = run_judgement(
        run,
        samples=job.samples,
        upstream=job.upstream,
        figures=(job.median, job.p20, job.p80),
        job_state={"sampling": job.sampling, "gpu_state": job.gpu_state, "environment": job.environment},
        measured_by=measured_by,
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
        "verdict_model": judged.model,
    }
    if judged.model is None:
        job.sampling.pop("verdict_model")
    job.verdict_note = judgement_note(judged, subject="Rerun")
    job.judged_under = judgement_rule()
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
