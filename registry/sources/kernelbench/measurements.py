"""KernelBench problems measured by KernelIndex's own harness (registry/sources/kernelbench/harness.py):
a measurement is a finished measure job holding the raw samples and the `measured` controlled run
it made; a measurement of the same problem and implementation on another card is a rerun of that
run, judged by the reruns app's one rule (`rerun_record_result`), which alone may make it
`reproduced`.

On the CPU `manage.py measure_kernelbench` measures one run's problem here. A GPU host measures
many with `python -m registry.sources.kernelbench.gpu_sweep` (no Django there), and
`manage.py record_kernelbench_gpu FILE` records its output: the file is from outside the web
tier, so each line is checked before anything of it is written, and each is recorded in its own
transaction.
"""

import json
import math
import uuid
import zlib
from collections import Counter
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from registry import digests
from registry.cache import generation_bump
from registry.models import BenchmarkRun
from registry.reruns.harness.timing import protocol_core
from registry.services.imports import ImportRejected
from registry.sources.kernelbench import importer, protocols
from registry.sources.kernelbench.gpu_sweep import output_lines
from registry.sources.kernelbench.harness import CONFIGURATIONS

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


@transaction.atomic
def kernelbench_measurement_record(
    *, of: BenchmarkRun, implementation: str, result: dict, timing_settings: dict, device: str = "cpu"
) -> BenchmarkRun:
    """Record a harness result for the workload of the KernelBench run `of`: a finished measure
    job holding the raw samples, and the `measured` controlled run it made (through the recorder's
    own `measured_run_from_job`), in one transaction."""
    from registry.reruns.services.measured_run import MeasuredDescription, measured_run_from_job

    finished = _finished_at(result)
    protocol_spec = harness_protocol(device, timing_settings)
    slug = "cpu" if device == "cpu" else slugify(result["environment"].get("gpu_name") or "")
    job = _measure_job_create(of, implementation, result, protocol_spec, slug, finished)
    protocol = {
        **digests.protocol_row(
            protocol_spec, slug=f"{protocol_spec['name']}-kernelbench", statistic="median"
        ),
        "digest": digests.digest(protocol_spec),
    }
    description = MeasuredDescription(
        implementation=importer.implementation_fields(
            of.kernel.slug, FILE_KEYS[implementation], revision=str(result["environment"].get("torch", ""))
        ),
        protocol=protocol,
        environment=_environment(device, result["environment"]),
        external_id=f"{of.kernel.slug}/{implementation}/{slug}/{of.workload.slug}/"
        f"{finished:%Y-%m-%d-%H-%M-%S}-job{job.pk}",
        upstream_key=digests.digest([of.kernel.slug, implementation, of.workload.digest, slug]),
        labels={"job": job.pk},
        correctness_note="The harness times the problem's reference; it compares no outputs.",
        results_name_source_metrics=False,
    )
    created = measured_run_from_job(job=job, description=description)
    job.result_run = created
    job.save(update_fields=["result_run"])
    generation_bump()
    return created


def _measure_job_create(of, implementation, result, protocol_spec, slug, finished):
    """The finished measure job that holds the raw samples of a measurement."""
    from registry.reruns.models import JobKind, JobState, RerunJob

    job = RerunJob(
        kind=JobKind.MEASURE,
        state=JobState.SUCCEEDED,
        kernel=of.kernel,
        workload=of.workload,
        provider=implementation,
        operation_mode=of.operation_mode,
        metric=of.metric,
        gpu_slug=slug,
        gpu_uuid=str(result.get("gpu_uuid") or "")[:64],
        gpu_state=result.get("gpu_state") or {},
        worker_gpu=str(result["environment"].get("gpu_name") or "CPU")[:200],
        reason=f"KernelBench reference under {protocol_spec['name']} ({implementation})",
        attempts=1,
        started_at=finished,
        finished_at=finished,
        unit="ms",
        **{
            k: result[k]
            for k in ("median", "p20", "p80", "ci_low", "ci_high", "samples", "sampling", "upstream")
        },
        environment=result["environment"],
        protocol=protocol_spec,
    )
    job.judged_interval_set()
    job.save()
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


def gpu_sweep_record(*, path: Path | str) -> Counter:
    """Record every line of a gpu_sweep output file: a problem and implementation not yet measured
    on that GPU model becomes a `measured` run; one already measured on it becomes a rerun of that
    run, judged (`rerun_record_result`: `reproduced` only when it agrees on another card); a line
    already recorded (its card and time) changes nothing, so recording a file twice is safe. Every
    line is checked first: a malformed one refuses the whole file, naming its line, before anything
    is written. Returns how many lines went each way."""
    path = Path(path)
    entries = _entries(path)
    problems = _problem_runs({entry["sha256"] for _, entry in entries if entry.get("result")})
    for number, entry in entries:
        if entry.get("result") and entry["sha256"] not in problems:
            raise ImportRejected(
                f"{path.name}, line {number}: no KernelBench run has the problem file {entry['sha256'][:12]}"
            )
    recorded = _Recorded({run.workload_id for run in problems.values()})
    outcome = Counter()
    for _, entry in entries:
        outcome[_entry_record(entry, problems, recorded)] += 1
    return outcome


class _Recorded:
    """What a file's lines look up before recording, read for the whole file in three queries
    rather than three a line: the first current controlled run of each (workload, implementation,
    GPU model), its measure job's card and time, its reruns' cards and times; kept as the file's
    lines are recorded (the run a measurement makes, the card and time of each rerun), so that
    each answer is the database's at that line. A file recorded again, all of it unchanged,
    writes nothing."""

    def __init__(self, workload_ids: set[int]):
        current = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled", workload_id__in=workload_ids, superseded_by__isnull=True
        )
        self.runs: dict[tuple, BenchmarkRun] = {}
        for run in current.select_related("implementation", "environment").order_by("pk"):
            if run.implementation_id and run.environment_id:
                key = (run.workload_id, run.implementation.provider, run.environment.slug)
                self.runs.setdefault(key, run)
        from registry.reruns.models import JobKind, RerunJob

        self.measures: dict[int, tuple] = {}
        measures = RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=current.values("pk"))
        for run_id, *card_and_time in measures.values_list("result_run_id", "gpu_uuid", "finished_at"):
            self.measures.setdefault(run_id, tuple(card_and_time))  # the Meta ordering's first
        reruns = RerunJob.objects.filter(kind=JobKind.RERUN, run__in=current.values("pk"))
        self.reruns = set(reruns.values_list("run_id", "gpu_uuid", "started_at"))

    def measured_run(self, of: BenchmarkRun, implementation: str, slug: str) -> BenchmarkRun | None:
        return self.runs.get((of.workload_id, implementation, slug))

    def measured(self, of: BenchmarkRun, implementation: str, slug: str, run: BenchmarkRun, card, finished):
        """A line made `run`, the first current run of its key (there was none)."""
        self.runs[of.workload_id, implementation, slug] = run
        self.measures[run.pk] = (card, finished)

    def rerun(self, run: BenchmarkRun, card: str, finished: datetime) -> None:
        self.reruns.add((run.pk, card, finished))

    def holds(self, run: BenchmarkRun, card: str, finished: datetime) -> bool:
        """Whether the line measured on `card` at `finished` made `run` or is one of its reruns."""
        return self.measures.get(run.pk) == (card, finished) or (run.pk, card, finished) in self.reruns


def _problem_runs(digests_: set[str]) -> dict[str, BenchmarkRun]:
    """A KernelBench run of each problem file (by its sha256), a current one where there is one,
    in one query: the run whose kernel and workload a measurement of that file records."""
    found: dict[str, BenchmarkRun] = {}
    runs = (
        BenchmarkRun.objects.select_related("kernel", "workload")
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


def _entry_record(entry: dict, problems: dict[str, BenchmarkRun], recorded: _Recorded) -> str:
    if entry.get("result") is None:
        return "failed on the host"
    result = {**entry["result"], "finished_at": entry.get("finished_at")}
    device = "cpu" if result["environment"]["gpu_name"] == "CPU" else "cuda"
    of = problems[entry["sha256"]]
    slug = "cpu" if device == "cpu" else slugify(result["environment"]["gpu_name"])
    measured = recorded.measured_run(of, entry["implementation"], slug)
    if measured is None:
        created = kernelbench_measurement_record(
            of=of, implementation=entry["implementation"], result=result,
            timing_settings=entry["timing"], device=device,
        )  # fmt: skip
        card = str(result.get("gpu_uuid") or "")[:64]
        recorded.measured(of, entry["implementation"], slug, created, card, _finished_at(result))
        return "measured"
    return _rerun_record(measured, entry, result, slug, recorded)


def _rerun_record(run: BenchmarkRun, entry: dict, result: dict, slug: str, recorded: _Recorded) -> str:
    from registry.reruns.models import JobKind, JobState, RerunJob
    from registry.reruns.services.record import rerun_record_result

    finished = _finished_at(result)
    card = str(result.get("gpu_uuid") or "")[:64]
    if recorded.holds(run, card, finished):
        return "unchanged"
    lease = uuid.uuid4().hex
    with transaction.atomic():
        job = RerunJob.objects.create(
            kind=JobKind.RERUN,
            state=JobState.RUNNING,
            run=run,
            kernel=run.kernel,
            workload=run.workload,
            provider=entry["implementation"],
            operation_mode=run.operation_mode,
            metric=run.metric,
            gpu_slug=slug,
            gpu_uuid=card,
            lease=lease,
            attempts=1,
            started_at=finished,
            reason="KernelBench problem measured again on a GPU host (gpu_sweep)",
        )
        wire = {
            "status": "ok",
            "unit": "ms",
            **{
                k: result.get(k)
                for k in ("median", "p20", "p80", "samples", "sampling", "gpu_uuid", "gpu_state")
            },
            "upstream": {},  # KernelBench's way (a mean) is kept on the measure job, not judged
            "environment": {**result["environment"], "gpu_slug": slug},
            "protocol": harness_protocol("cpu" if slug == "cpu" else "cuda", entry["timing"]),
            "log": "",
        }
        done = rerun_record_result(job_id=job.pk, lease=lease, result=wire)
    recorded.rerun(run, card, finished)
    return f"rerun {done.verdict or done.state}"
