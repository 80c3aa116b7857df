"""KernelBench problems measured by KernelIndex's own harness (registry/sources/kernelbench/harness.py):
a measurement is a finished measure job holding the raw samples and the `measured` controlled run
it made; a measurement of the same problem and implementation on another card is a rerun of that
run, judged by the reruns app's one rule (`rerun_record_result`), which alone may make it
`reproduced`.

On the CPU `manage.py measure_kernelbench` measures one run's problem here. A GPU host measures
many with `python -m registry.sources.kernelbench.gpu_sweep` (no Django there), and
`manage.py record_kernelbench_gpu FILE` records its output: the file is from outside the web
tier, so each line is checked before anything of it is written; the file is then recorded in one
transaction, its jobs and runs written in bulk (a first load records the 25 shipped files' 1,462
measurements and reruns), judged by the same functions as one job at a time.
"""

import json
import math
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from registry import digests
from registry.cache import generation_bump
from registry.models import BenchmarkRun
from registry.reruns.harness.timing import protocol_core
from registry.rows import rows_update
from registry.services.imports import ImportRejected
from registry.sources.kernelbench import importer, programs, protocols
from registry.sources.kernelbench.gpu_sweep import output_lines
from registry.sources.kernelbench.harness import CONFIGURATIONS
from registry.speed_of_light import measured_ceilings

FILE_KEYS = {  # the implementation each harness configuration is, as a timing file names it
    "eager": "baseline_time_torch.json",
    "compile-inductor-default": "baseline_time_torch_compile_inductor_default.json",
}
NOTES = (
    "The problem file's Model(*get_init_inputs()) called on get_inputs() under torch.no_grad, in a "
    "child process, sampled by KernelIndex's loop in independent blocks, each with fresh inputs "
    "(docs/protocol.md); upstream's own figure (3 warm-up calls, 100 timed calls, mean) is kept beside it."
)


def harness_protocol(device: str, timing_settings: dict) -> dict:
    """`kernelindex-cpu-v1` or `kernelindex-cuda-v1` for a KernelBench problem: KernelIndex's
    sampling loop around the problem's reference Model; the same description for every such job."""
    timing = {**settings.CONTROLLED_TIMING, **timing_settings}
    protocol = {
        "harness": "KernelBench problem reference (registry.sources.kernelbench.harness)",
        "harnessRepository": protocols.REPOSITORY,
        "statistic": "median",
        "quantiles": [0.5, 0.2, 0.8],
        **protocol_core(device, timing),
    }
    if device == "cpu":
        return {
            **protocol,
            "notes": NOTES + " Not comparable with any GPU timing, nor with KernelBench's published figures.",
        }
    return {
        **protocol,
        "notes": NOTES + " KernelBench's published figures flush no cache and take a mean: not "
        "comparable with them, only with upstream's figure kept beside each measurement.",
    }


@dataclass(frozen=True)
class _Measured:
    """One harness result for the workload of the KernelBench run `of`, and where it ran."""

    of: BenchmarkRun
    implementation: str
    result: dict
    timing_settings: dict
    device: str

    @cached_property
    def slug(self) -> str:
        return "cpu" if self.device == "cpu" else slugify(self.result["environment"].get("gpu_name") or "")

    @cached_property
    def finished(self) -> datetime:
        return _finished_at(self.result)

    @property
    def card(self) -> str:
        return str(self.result.get("gpu_uuid") or "")[:64]

    @property
    def key(self) -> tuple:
        """What a sweep file's line measures: (workload, implementation, GPU model)."""
        return (self.of.workload_id, self.implementation, self.slug)

    @cached_property
    def protocol_spec(self) -> dict:
        return harness_protocol(self.device, self.timing_settings)


@transaction.atomic
def kernelbench_measurement_record(
    *, of: BenchmarkRun, implementation: str, result: dict, timing_settings: dict, device: str = "cpu"
) -> BenchmarkRun:
    """Record a harness result for the workload of the KernelBench run `of`: a finished measure
    job holding the raw samples, and the `measured` controlled run it made (through the recorder's
    own `measured_run_from_job`), in one transaction."""
    from registry.reruns.services.measured_run import measured_run_from_job

    measured = _Measured(of, implementation, result, timing_settings, device)
    job = _measure_job_build(measured)
    job.save()
    created = measured_run_from_job(job=job, description=_measured_description(measured, job))
    job.result_run = created
    job.save(update_fields=["result_run"])
    generation_bump()
    return created


def _measured_description(measured: _Measured, job):
    """How KernelBench describes the run that its saved measure job `job` makes."""
    from registry.reruns.services.measured_run import MeasuredDescription

    of, implementation, spec = measured.of, measured.implementation, measured.protocol_spec
    protocol = {
        **digests.protocol_row(spec, slug=f"{spec['name']}-kernelbench", statistic="median"),
        "digest": digests.digest(spec),
    }
    environment = measured.result["environment"]
    return MeasuredDescription(
        implementation=importer.implementation_fields(
            of.kernel.slug, FILE_KEYS[implementation], revision=str(environment.get("torch", ""))
        ),
        protocol=protocol,
        environment=_environment(measured.device, environment),
        external_id=f"{of.kernel.slug}/{implementation}/{measured.slug}/{of.workload.slug}/"
        f"{measured.finished:%Y-%m-%d-%H-%M-%S}-job{job.pk}",
        upstream_key=digests.digest([of.kernel.slug, implementation, of.workload.digest, measured.slug]),
        labels={"job": job.pk},
        correctness_note="The harness times the problem's reference; it compares no outputs.",
        results_name_source_metrics=False,
    )


def _job_fields(measured: _Measured, *, on: BenchmarkRun) -> dict:
    """What a measure or rerun job of a measurement says of it: `on`'s kernel, workload and pass
    (the KernelBench run measured, or the run measured again), timed on the measurement's card."""
    return {
        "kernel": on.kernel,
        "workload": on.workload,
        "provider": measured.implementation,
        "operation_mode": on.operation_mode,
        "metric": on.metric,
        "gpu_slug": measured.slug,
        "gpu_uuid": measured.card,
        "attempts": 1,
        "started_at": measured.finished,
    }


def _measure_job_build(measured: _Measured):
    """The finished measure job, unsaved, that holds the raw samples of a measurement."""
    from registry.reruns.models import JobKind, JobState, RerunJob

    result = measured.result
    job = RerunJob(
        kind=JobKind.MEASURE,
        state=JobState.SUCCEEDED,
        **_job_fields(measured, on=measured.of),
        gpu_state=result.get("gpu_state") or {},
        worker_gpu=str(result["environment"].get("gpu_name") or "CPU")[:200],
        reason=f"KernelBench reference under {measured.protocol_spec['name']} ({measured.implementation})",
        finished_at=measured.finished,
        unit="ms",
        **{
            k: result[k]
            for k in ("median", "p20", "p80", "ci_low", "ci_high", "samples", "sampling", "upstream")
        },
        environment=result["environment"],
        protocol=measured.protocol_spec,
    )
    job.judged_interval_set()
    return job


def _finished_at(result: dict) -> datetime:
    """When the line's job finished, with its zone: a time written without one is read in the
    default zone, as the database would read it."""
    at = result.get("finished_at")
    if isinstance(at, str):
        try:
            found = datetime.fromisoformat(at.replace("Z", "+00:00")).replace(microsecond=0)
        except ValueError:
            pass
        else:
            return found if timezone.is_aware(found) else timezone.make_aware(found)
    return timezone.now().replace(microsecond=0)


def _environment(device: str, captured: dict) -> dict:
    software = {k: str(captured[k]) for k in ("torch", "python", "driver", "cuda") if captured.get(k)}
    if device != "cpu":
        return importer.environment_fields(captured.get("gpu_name") or "", software=software)
    spec = {
        "gpu": {"name": "CPU"},
        "vendor": "",
        "product": "CPU",
        "formFactor": "",
        "architecture": captured.get("machine", ""),
        "software": software,
    }
    return {
        "slug": "cpu",
        "vendor": "",
        "product": "CPU",
        "form_factor": "",
        "architecture": spec["architecture"],
        "software": spec["software"],
        "spec": spec,
        "digest": digests.digest(spec),
    }


# --- a GPU host's sweep (gpu_sweep's JSON lines) --------------------------------------------------


@transaction.atomic
def gpu_sweep_record(*, path: Path | str) -> Counter:
    """Record every line of a gpu_sweep output file, in one transaction: a problem and
    implementation not yet measured on that GPU model becomes a `measured` run; one already
    measured on it becomes a rerun of that run, judged (as `rerun_record_result` judges one:
    `reproduced` only when it agrees on another card); a line already recorded (its card and time)
    changes nothing, so recording a file twice is safe. Every line is checked first: a malformed
    one refuses the whole file, naming its line, before anything is written. The file's jobs and
    runs are then written in bulk (`_Sweep`), leaving the rows that recording its lines one at a
    time left. Returns how many lines went each way."""
    path = Path(path)
    entries = [(number, programs.annotate(path.name, entry)) for number, entry in _entries(path)]
    problems = _problem_runs({entry["sha256"] for _, entry in entries if entry.get("result")})
    for number, entry in entries:
        if entry.get("result") and entry["sha256"] not in problems:
            raise ImportRejected(
                f"{path.name}, line {number}: no KernelBench run has the problem file {entry['sha256'][:12]}"
            )
    sweep = _Sweep(_Recorded({run.workload_id for run in problems.values()}))
    for _, entry in entries:
        sweep.line_add(entry, problems)
    sweep.write()
    return sweep.outcome()


_MEASURING = object()  # the run a line of the file being recorded measures, not written yet


class _Recorded:
    """What a file's lines look up before recording, read for the whole file in three queries
    rather than three a line: the first current controlled run of each (workload, implementation,
    GPU model), and the cards and times of its measure job and of its reruns; kept as the file's
    lines are recorded (the run a measurement makes, the card and time of each rerun), so that
    each answer is the database's at that line. A file recorded again, all of it unchanged,
    writes nothing."""

    def __init__(self, workload_ids: set[int]):
        from registry.reruns.models import JobKind, RerunJob

        current = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled", workload_id__in=workload_ids, superseded_by__isnull=True
        )
        self.runs: dict[tuple, BenchmarkRun] = {}
        for run in current.select_related("implementation", "environment").order_by("pk"):
            if run.implementation_id and run.environment_id:
                self.runs.setdefault(
                    (run.workload_id, run.implementation.provider, run.environment.slug), run
                )
        key_of = {run.pk: key for key, run in self.runs.items()}
        self.done: dict[tuple, set] = {key: set() for key in self.runs}  # cards and times
        measures = RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=key_of)
        measured = {}
        for run_id, *card_and_time in measures.values_list("result_run_id", "gpu_uuid", "finished_at"):
            measured.setdefault(run_id, tuple(card_and_time))  # the Meta ordering's first
        for run_id, card_and_time in measured.items():
            self.done[key_of[run_id]].add(card_and_time)
        reruns = RerunJob.objects.filter(kind=JobKind.RERUN, run__in=key_of)
        for run_id, *card_and_time in reruns.values_list("run_id", "gpu_uuid", "started_at"):
            self.done[key_of[run_id]].add(tuple(card_and_time))

    def run(self, line: _Measured):
        """The run the line's measurement is a rerun of, `_MEASURING` or None."""
        return self.runs.get(line.key)

    def holds(self, line: _Measured) -> bool:
        """Whether the line (measured on its card at its time) made that run or is a rerun of it."""
        return (line.card, line.finished) in self.done.get(line.key, ())

    def recorded(self, line: _Measured, *, run=None) -> None:
        """A line that measures (`run`: the run it made, or `_MEASURING` until it is written) or
        that is a rerun."""
        if run is not None:
            self.runs[line.key] = run
        self.done.setdefault(line.key, set()).add((line.card, line.finished))


class _Sweep:
    """A file's lines to record, written in bulk: every measure and rerun job in the order of
    its lines (`finished_jobs_create`, which judges the reruns), then the runs its measurements
    make, together (`measured_runs_create`). A rerun of a run that an earlier line of the same file
    measures has that line written first."""

    def __init__(self, recorded: _Recorded):
        self.recorded = recorded
        self.jobs, self.measuring, self.outcomes = [], [], []

    def line_add(self, entry: dict, problems: dict[str, BenchmarkRun]) -> None:
        if entry.get("result") is None:
            self.outcomes.append("failed on the host")
            return
        result = {**entry["result"], "finished_at": entry.get("finished_at")}
        device = "cpu" if result["environment"]["gpu_name"] == "CPU" else "cuda"
        line = _Measured(problems[entry["sha256"]], entry["implementation"], result, entry["timing"], device)
        run = self.recorded.run(line)
        if run is None:
            job = _measure_job_build(line)
            self.jobs.append(job)
            self.measuring.append((line, job))
            self.recorded.recorded(line, run=_MEASURING)
            self.outcomes.append("measured")
        elif self.recorded.holds(line):
            self.outcomes.append("unchanged")
        else:
            if run is _MEASURING:
                self.write()
            self.jobs.append(_rerun_job_build(self.recorded.run(line), line))
            self.recorded.recorded(line)
            self.outcomes.append(self.jobs[-1])

    def write(self) -> None:
        from registry.reruns.services.record import finished_jobs_create

        if not self.jobs:
            return
        finished_jobs_create(jobs=self.jobs)
        for (line, _), run in zip(self.measuring, _measured_runs_create(self.measuring), strict=True):
            self.recorded.recorded(line, run=run)
        self.jobs, self.measuring = [], []

    def outcome(self) -> Counter:
        return Counter(
            done if isinstance(done, str) else f"rerun {done.verdict or done.state}" for done in self.outcomes
        )


def _measured_runs_create(measuring: list[tuple[_Measured, object]]) -> list[BenchmarkRun]:
    """The `measured` runs of saved measure jobs, created together, each job pointed at its run."""
    from registry.reruns.services.measured_run import (
        controlled_source,
        measured_run_build,
        measured_run_fields,
        measured_runs_create,
    )

    source, specs, ceilings = controlled_source(), {}, measured_ceilings()
    runs = measured_runs_create(
        [
            measured_run_build(
                **measured_run_fields(job=job, description=_measured_description(line, job), source=source),
                specs=specs,
                ceilings=ceilings,
            )
            for line, job in measuring
        ]
    )
    for (_, job), run in zip(measuring, runs, strict=True):
        job.result_run = run
    rows_update([job for _, job in measuring], ["result_run"])
    return runs


def _problem_runs(digests_: set[str]) -> dict[str, BenchmarkRun]:
    """A KernelBench run of each problem file (by its sha256), a current one where there is one,
    in one query: the run whose kernel and workload a measurement of that file records (only the
    columns a measurement reads of it: not its manifest and figures, for every run of 14 versions)."""
    found: dict[str, BenchmarkRun] = {}
    runs = (
        BenchmarkRun.objects.select_related("kernel", "workload")
        .only("kernel", "workload", "operation_mode", "metric", "superseded_by")
        .filter(
            source__slug=protocols.SOURCE["slug"],
            workload__spec__problem__sha256__in=[f"sha256:{digest}" for digest in digests_],
        )
        .order_by("pk")
    )
    for run in runs:
        digest = run.workload.spec["problem"]["sha256"].removeprefix("sha256:")
        known = found.get(digest)
        if known is None or known.superseded_by_id is not None or run.superseded_by_id is None:
            found[digest] = run
    return found


def _entries(path: Path) -> list[tuple[int, dict]]:
    try:
        lines = output_lines(path)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ImportRejected(f"{path.name}: not a readable text file ({exc})") from None
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ImportRejected(f"{path.name}, line {number}: not JSON ({exc})") from None
        problem = _entry_problem(entry)
        if problem:
            raise ImportRejected(f"{path.name}, line {number}: {problem}")
        entries.append((number, entry))
    return entries


def _entry_problem(entry) -> str:
    if not isinstance(entry, dict):
        return "not a JSON object"
    if not isinstance(entry.get("sha256"), str) or len(entry["sha256"]) != 64:
        return "no problem file digest (sha256)"
    if entry.get("implementation") not in CONFIGURATIONS:
        return f"implementation {entry.get('implementation')!r} is not one of {sorted(CONFIGURATIONS)}"
    result = entry.get("result")
    if result is None:
        return "" if isinstance(entry.get("error"), str) else "neither a result nor an error"
    if not isinstance(result, dict):
        return "the result is not an object"
    samples = result.get("samples")
    if not isinstance(samples, list) or len(samples) < 4 or not all(_positive(s) for s in samples):
        return "the result needs four or more positive, finite samples"
    if not all(_positive(result.get(k)) for k in ("median", "p20", "p80")):
        return "the result's median, p20 and p80 must be positive numbers"
    environment = result.get("environment")
    if not isinstance(environment, dict) or not isinstance(environment.get("gpu_name"), str):
        return "the result names no GPU (environment.gpu_name)"
    if not isinstance(entry.get("timing"), dict) or not set(settings.CONTROLLED_TIMING) <= set(
        entry["timing"]
    ):
        return "the timing settings are missing or incomplete"
    return ""


def _positive(value) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def _rerun_job_build(run: BenchmarkRun, line: _Measured):
    """The rerun of `run` that a sweep line is, unsaved, finished with its result as a worker's
    would be (`job_result_apply`), to be judged when it is written."""
    from registry.reruns.harness.job_result import JobResult
    from registry.reruns.models import JobKind, JobState, RerunJob
    from registry.reruns.services.record import job_result_apply

    result = line.result
    job = RerunJob(
        kind=JobKind.RERUN,
        state=JobState.RUNNING,
        run=run,
        **_job_fields(line, on=run),
        lease=uuid.uuid4().hex,
        reason="KernelBench problem measured again on a GPU host (gpu_sweep)",
    )
    wire = {
        "status": "ok",
        "unit": "ms",
        **{
            k: result.get(k) for k in ("median", "p20", "p80", "samples", "sampling", "gpu_uuid", "gpu_state")
        },
        "upstream": {},  # KernelBench's way (a mean) is kept on the measure job, not judged
        "environment": {**result["environment"], "gpu_slug": line.slug},
        "protocol": line.protocol_spec,
        "log": "",
    }
    job_result_apply(job, JobResult.from_wire(wire))
    return job
