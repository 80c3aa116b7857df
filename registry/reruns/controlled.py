"""KernelIndex's own controlled runs as shipped data: export them with the jobs that produced and
checked them, and load them into another installation.

A file is JSON, gzip-compressed as shipped (`<gpu>-<kernel>.json.gz`; a plain `.json` loads too):
{"format": FORMAT, "runs": [{kernel, workload, implementation, protocol, environment, run, jobs}]}.
Every sample of every job travels, so the shipped sweep is tens of megabytes of JSON and an
eighth of that compressed. Loading is all or nothing and safe to repeat (a run whose digest is
already there keeps its measurements; only the jobs it lacks, reruns judged since, are added). A
run is loaded at `measured` only with the measure job that made it, and at `reproduced` only with
a rerun job whose verdict agrees: the file carries the evidence, not just the level.
"""

import gzip
import json
import os
import zlib
from datetime import datetime
from pathlib import Path

from django.db import models, transaction
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import BenchmarkRun, EvidenceLevel, Kernel, Source, Workload
from registry.reruns.models import ACTIVE_JOB_STATES, JobKind, JobState, RerunJob, raises_level
from registry.reruns.services.measured_run import (
    CONTROLLED_SOURCE,
    controlled_source,
    measured_run_build,
    measured_runs_create,
    spec_row,
)
from registry.reruns.services.worker import CPU_SLUG
from registry.services.imports import ImportRejected, ImportSummary
from registry.services.run_keys import RUN_KEY_SOURCES
from registry.speed_of_light import SOL_FIELDS, measured_ceilings

FORMAT = "kernelindex-controlled-runs/v1"
BUNDLED_CONTROLLED_DIR = Path(__file__).resolve().parent.parent / "data" / "controlled-runs"
SUFFIXES = (".json.gz", ".json")
LOG_KEPT = 4000  # characters of each job's log that ship with the data
# Not exported: the registry's own bookkeeping, the run's copies of its specs' values
# (run_keys.RUN_KEY_SOURCES) and its speed-of-light verdict (speed_of_light.SOL_FIELDS), all
# written again on load.
SKIPPED_FIELDS = {
    *SOL_FIELDS,
    "id",
    "published_at",
    "updated_at",
    "first_import",
    "superseded_by",
    "lease",
    "judged_ci_low",  # a job's judged interval, computed from its samples on load
    "judged_ci_high",
    "judged_under",  # the rule its verdict was judged under: this registry's, never a file's
    *RUN_KEY_SOURCES,
}


def controlled_runs_export(*, runs) -> dict:
    """The document for `runs` (controlled runs), with their measure and rerun jobs."""
    runs = list(runs.select_related("kernel", "workload", "implementation", "protocol", "environment"))
    jobs = _finished_jobs_of(runs)
    entries = [
        {
            "kernel": {"slug": run.kernel.slug, "name": run.kernel.name},
            "workload": _fields(run.workload),
            "implementation": _fields(run.implementation),
            "protocol": _fields(run.protocol),
            "environment": _fields(run.environment),
            "run": _fields(run),
            "jobs": [_job_fields(job, run) for job in jobs.get(run.pk, [])],
        }
        for run in runs
    ]
    return {"format": FORMAT, "source": CONTROLLED_SOURCE, "runs": entries}


EXPORT_BATCH = 500  # runs whose jobs are read in one query (SQLite's limit on bound parameters)


def _finished_jobs_of(runs: list[BenchmarkRun]) -> dict[int, list[RerunJob]]:
    """Each run's jobs, the one that measured it (`result_run`) and those run on it (`run`), in
    the order they were created, read a batch of runs at a time: a query per run, the OR of two
    foreign keys, took longer than the rest of an export. Only finished jobs travel: a queued or
    running one belongs to this installation's queues."""
    found: dict[int, list[RerunJob]] = {}
    for start in range(0, len(runs), EXPORT_BATCH):
        batch = {run.pk for run in runs[start : start + EXPORT_BATCH]}
        jobs = (
            RerunJob.objects.filter(models.Q(result_run__in=batch) | models.Q(run__in=batch))
            .exclude(state__in=ACTIVE_JOB_STATES)
            .order_by("created_at", "pk")
        )
        for job in jobs:
            for pk in {job.result_run_id, job.run_id} & batch:
                found.setdefault(pk, []).append(job)
    return found


def controlled_files(path: Path) -> list[Path]:
    """The export files of a folder (`*.json.gz` and `*.json`), or the one file named."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    return sorted(file for file in path.iterdir() if file.name.endswith(SUFFIXES))


def controlled_runs_export_dir(*, out: Path, gpu_slug: str, kernels=None) -> list[Path]:
    """One file per kernel (`<gpu>-<kernel>.json.gz`) of every controlled run on `gpu_slug`, or
    only of `kernels`; a plain `.json` of the same kernel (an older export) is replaced by it."""
    runs = BenchmarkRun.objects.filter(source__slug=CONTROLLED_SOURCE["slug"], environment__slug=gpu_slug)
    if kernels is not None:
        runs = runs.filter(kernel__slug__in=kernels)
    written = []
    for kernel in runs.values_list("kernel__slug", flat=True).distinct().order_by("kernel__slug"):
        document = controlled_runs_export(runs=runs.filter(kernel__slug=kernel).order_by("external_id"))
        path = Path(out) / f"{gpu_slug}-{kernel}.json.gz"
        controlled_document_write(path, document)
        path.with_suffix("").unlink(missing_ok=True)
        written.append(path)
    return written


def controlled_document_write(path: Path, document: dict) -> None:
    """Write an export: gzip-compressed where the name ends in `.gz`, with a zero timestamp so that
    the same runs give the same bytes (a re-export changes nothing in git); else plain JSON. The
    file is replaced whole (written beside it, then renamed): a writer killed halfway leaves the
    previous export, never half of one."""
    data = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()
    path = Path(path)
    whole_file_write(
        path, gzip.compress(data, compresslevel=9, mtime=0) if path.name.endswith(".gz") else data
    )


def whole_file_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` whole: written beside it, then renamed, so that a writer killed
    halfway leaves the previous file, never half of one."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


@transaction.atomic
def controlled_runs_load(*, path: Path | str) -> ImportSummary:
    """Load every export in `path` (a folder of `*.json.gz` and `*.json` files, or one file): the
    runs not in the registry yet (by digest) and their jobs, in bulk, a file at a time."""
    files = controlled_files(path)
    source = controlled_source()
    summary = ImportSummary()
    specs = {}  # spec rows by (model, digest), looked up once for the whole load
    ceilings = measured_ceilings()
    for file in files:
        entries = controlled_document_read(file)["runs"]
        summary.rows += len(entries)
        digests = [entry["run"]["digest"] for entry in entries]
        # Only what adding jobs needs: a run's manifest and samples stay in the database.
        there = (
            BenchmarkRun.objects.select_related("implementation")
            .only("digest", "evidence_level", "kernel_id", "workload_id", "implementation__provider")
            .in_bulk(digests, field_name="digest")
        )
        seen = set()
        new, known = [], []
        for number, entry in enumerate(entries, start=1):
            digest = entry["run"]["digest"]
            if digest in seen:
                continue
            seen.add(digest)
            (known if digest in there else new).append((entry, f"{file.name}, run {number}"))
        summary.created += len(new)
        _runs_load(new, source, specs=specs, ceilings=ceilings)
        extended = _jobs_add(known, there)
        summary.extended += extended
        summary.unchanged += len(entries) - len(new) - extended
    generation_bump()
    return summary


def controlled_document_read(file: Path) -> dict:
    """One export file's document, checked to be one."""
    try:
        data = file.read_bytes()
        document = json.loads(gzip.decompress(data) if file.name.endswith(".gz") else data)
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        raise ImportRejected(f"{file.name}: not a readable JSON document ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ImportRejected(f"{file.name}: not a {FORMAT} document")
    return document


def _runs_load(entries: list[tuple[dict, str]], source: Source, *, specs: dict, ceilings: dict) -> None:
    """Runs (each entry with where it was read, for errors) and then their jobs, in bulk."""
    built, providers = [], []
    for entry, where in entries:
        fields = dict(entry["run"])
        fields["evidence_level"] = _evidence_check(fields, entry["jobs"], where)
        kernel = spec_row(Kernel, entry["kernel"], by="slug", cache=specs)
        implementation = _implementation_fields(entry["implementation"])
        providers.append(implementation["provider"])
        workload = spec_row(Workload, _workload_fields(entry["workload"]), cache=specs, kernel=kernel)
        built.append(
            measured_run_build(
                source=source,
                kernel=kernel,
                workload=workload,
                implementation=implementation,
                protocol=entry["protocol"],
                environment=entry["environment"],
                run={**fields, "observed_at": datetime.fromisoformat(fields["observed_at"])},
                specs=specs,
                ceilings=ceilings,
            )
        )
    runs = measured_runs_create(built)
    jobs = []
    for (entry, _), run, provider in zip(entries, runs, providers, strict=True):
        jobs += _jobs_build(entry["jobs"], run, provider)
    RerunJob.objects.bulk_create(jobs, batch_size=500)


def _jobs_add(entries: list[tuple[dict, str]], runs: dict[str, BenchmarkRun]) -> int:
    """Runs already in the registry: their measurements stay as they are, but a later export may
    carry jobs they lack (reruns judged since). Those are added, a job being known by its run,
    kind and creation time, and a run the added evidence makes `reproduced` is raised to it (a
    level is never lowered here: the registry may hold reruns the file does not). Returns how many
    runs were given jobs; in three queries whatever the count."""
    if not entries:
        return 0
    ids = [runs[entry["run"]["digest"]].pk for entry, _ in entries]
    have = set()
    for run_id, result_run_id, kind, created_at in RerunJob.objects.filter(
        models.Q(run_id__in=ids) | models.Q(result_run_id__in=ids)
    ).values_list("run_id", "result_run_id", "kind", "created_at"):
        have.add((run_id or result_run_id, kind, created_at))
    jobs, raised = [], set()
    for entry, where in entries:
        run = runs[entry["run"]["digest"]]
        level = _evidence_check(dict(entry["run"]), entry["jobs"], where)
        lacking = [
            job
            for job in entry["jobs"]
            if (run.pk, job["kind"], _date(job["dates"].get("created_at"))) not in have
        ]
        jobs += _jobs_build(lacking, run, run.implementation.provider)
        if lacking and level == EvidenceLevel.REPRODUCED and run.evidence_level != level:
            raised.add(run.pk)
    RerunJob.objects.bulk_create(jobs, batch_size=500)
    # As the recorder raises a level (services/record.py): the row's update time moves with it.
    BenchmarkRun.objects.filter(pk__in=raised).update(
        evidence_level=EvidenceLevel.REPRODUCED, updated_at=timezone.now()
    )
    return len({job.run_id or job.result_run_id for job in jobs})


def _date(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _jobs_build(jobs: list[dict], run: BenchmarkRun, provider: str) -> list[RerunJob]:
    """Job rows for `run` from their exported form (a `role` saying which side of the run each is
    on, and its `dates`)."""
    built = []
    for job in jobs:
        job = dict(job)
        job.pop("judged_under", None)  # a file's say that its verdict is today's is not taken
        role = job.pop("role")
        dates = {key: _date(value) for key, value in job.pop("dates").items()}
        link = {"result_run": run} if role == "measured" else {"run": run}
        job["provider"] = job.get("provider") or provider
        row = RerunJob(kernel_id=run.kernel_id, workload_id=run.workload_id, **link, **job, **dates)
        row.judged_interval_set()
        built.append(row)
    return built


def _implementation_fields(fields: dict) -> dict:
    """Files exported before `_fields` kept the spec columns named like the run's key copies lack
    `provider` (on the implementation and on each job): it is read back from the spec. A blank
    provider broke the run page's implementation link and drew every provider as one chart line."""
    return {**fields, "provider": fields.get("provider") or fields["spec"]["provider"]}


def _workload_fields(fields: dict) -> dict:
    """Likewise `x_name` and `x_value`, from the spec's sweep and parameters."""
    if fields.get("x_name"):
        return fields
    x_name = fields["spec"].get("sweep", {}).get("name", "")
    x_value = fields["spec"].get("parameters", {}).get(x_name)
    numeric = isinstance(x_value, int | float) and not isinstance(x_value, bool)
    return {**fields, "x_name": x_name, "x_value": x_value if numeric else None}


def _evidence_check(fields: dict, jobs: list, where: str) -> str:
    """The level the run loads at. `measured` needs the measure job that made the run;
    `reproduced` needs a rerun whose verdict agrees on another card (models.raises_level); a
    run whose agreeing reruns all ran on its measuring card, or whose measuring card is not
    recorded, loads at `measured`. A rerun judged
    before verdicts existed (by a fixed tolerance, with no verdict) is kept as history, and its
    run loads at `measured`."""
    level = fields.get("evidence_level")
    if level not in (EvidenceLevel.MEASURED, EvidenceLevel.REPRODUCED):
        raise ImportRejected(f"{where}: a controlled run is 'measured' or 'reproduced', not {level!r}")
    measured = any(j["role"] == "measured" and j["state"] == JobState.SUCCEEDED for j in jobs)
    if not measured:
        raise ImportRejected(f"{where}: level {level!r} without the measure job that made the run")
    reruns = [
        j
        for j in jobs
        if j["role"] == "rerun" and j["kind"] == JobKind.RERUN and j["state"] == JobState.SUCCEEDED
    ]
    if level == EvidenceLevel.REPRODUCED and not reruns:
        raise ImportRejected(f"{where}: level 'reproduced' without a succeeded rerun job")
    if level == EvidenceLevel.REPRODUCED and not any(
        raises_level(j.get("verdict"), j.get("sampling"), on_gpu=j.get("gpu_slug") != CPU_SLUG)
        for j in reruns
    ):
        return EvidenceLevel.MEASURED
    return level


def _other_models_own(instance) -> set[str]:
    """A spec's own columns named like the run's key copies (Implementation.provider,
    Workload.x_name, x_value) are exported: only the run's copies are left out."""
    return set() if isinstance(instance, BenchmarkRun) else set(RUN_KEY_SOURCES)


def _fields(instance) -> dict:
    out = {}
    for field in instance._meta.concrete_fields:
        if field.is_relation or field.name in SKIPPED_FIELDS - _other_models_own(instance):
            continue
        value = getattr(instance, field.attname)
        out[field.name] = value.isoformat() if isinstance(value, datetime) else value
    return out


def _job_fields(job: RerunJob, run: BenchmarkRun) -> dict:
    fields = _fields(job)
    dates = {
        name: fields.pop(name)
        for name in ("created_at", "sent_at", "started_at", "heartbeat_at", "finished_at")
    }
    fields.pop("issue_report_pk", None)  # issue reports do not travel with the data
    fields["log"] = fields["log"][-LOG_KEPT:]
    return {**fields, "dates": dates, "role": "measured" if job.result_run_id == run.pk else "rerun"}
