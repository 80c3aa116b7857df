"""Importing KernelBench's history: every version of results/timing, oldest first.

A run's upstream key is (timing file path with a leading old/ removed, level, problem file,
hardware); its value is mean, std, min, max, num_trials and the problem file's content. Per
version: a key listed with a new value is a new run that supersedes the key's last run; a key
listed with its last value keeps that run (listed again if it was withdrawn); a key whose run is
current and that the version no longer lists is withdrawn. Every version is read and checked
before anything is written; each is then imported in its own transaction, all or nothing, and a
version already imported is skipped, so a second import changes nothing.
"""

from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from registry import digests
from registry.cache import generation_bump
from registry.models import BenchmarkRun, SourceImport
from registry.services.imports import (
    ImportRejected,
    ImportSummary,
    VersionsSummary,
    _runs_build,
    _runs_insert,
    _source_get_or_create,
    _superseded_by_write,
    _update_in_batches,
    groups_rerank,
)
from registry.services.run_keys import run_keys_fill
from registry.sources.kernelbench import history, importer, protocols

BUNDLED = Path(__file__).resolve().parent / "data" / "kernelbench.tar.xz"


@dataclass
class _Prepared:
    version: history.Version
    rows: list  # importer.KernelBenchRow, one per key


def _prepare(version: history.Version) -> _Prepared:
    """Read and check one version, and build its records; raises on the first problem."""
    texts: dict[str, str] = {}
    cache: dict = {}
    built, seen = [], set()
    for row in version.rows():
        if row.key in seen:
            continue  # the same file listed under old/ and beside it, with the same values
        seen.add(row.key)
        blob = row.problem_blob
        if blob is not None and blob not in texts:
            texts[blob] = version.problem_text(blob)
        built.append(
            importer.build_row(
                row, commit=version.commit, date=version.date, text=texts.get(blob), cache=cache
            )
        )
    return _Prepared(version, built)


def kernelbench_import(*, path: Path | str, progress=None) -> VersionsSummary:
    try:
        versions = history.versions(path)
        done = set(
            SourceImport.objects.filter(
                source__slug=protocols.SOURCE["slug"], upstream_commit__in=[v.commit for v in versions]
            ).values_list("upstream_commit", flat=True)
        )
        prepared = [_prepare(v) for v in versions if v.commit not in done]
    except history.KernelBenchFormatError as exc:
        raise ImportRejected(f"KernelBench: {exc}") from None
    summary = VersionsSummary(versions=len(versions), already=len(done))
    for item in prepared:
        imported = kernelbench_version_import(prepared=item)
        summary.imported += 1
        for name, value in imported.as_dict().items():
            setattr(summary.totals, name, getattr(summary.totals, name) + value)
        if progress:
            progress(imported.rows)
    return summary


@transaction.atomic
def kernelbench_version_import(*, prepared: _Prepared) -> ImportSummary:
    version, rows = prepared.version, prepared.rows
    source = _source_get_or_create(protocols.SOURCE)
    record = SourceImport.objects.create(
        source=source,
        filename="results/timing",
        file_digest=digests.digest(sorted([list(pair) for pair in version.timing])),
        rows=len(rows),
        as_of=version.date,
        upstream_commit=version.commit,
        pull_request=version.pull_request,
        subject=version.subject[:500],
    )
    last = _last_runs(source)
    summary = ImportSummary(rows=len(rows))
    new_rows, restored, superseded, listed = [], [], {}, set()
    for row in rows:
        key = row.run["upstream_key"]
        listed.add(key)
        known = last.get(key)
        if known is not None and known["value"] == _value(row):
            summary.unchanged += 1
            if known["withdrawn"]:
                restored.append(known["pk"])
            continue
        new_rows.append(row)
    new_runs = _runs_build(new_rows, source, record)
    for run in new_runs:
        known = last.get(run.upstream_key)
        if known is not None:
            superseded[known["pk"]] = run.pk
    withdrawn = [known["pk"] for key, known in last.items() if key not in listed and not known["withdrawn"]]
    # One current run per target (a database constraint) after every statement: the runs a new
    # value replaces point at it before it is written (foreign keys are checked at commit).
    _superseded_by_write(superseded)
    _runs_insert(new_runs, [None] * len(new_runs))
    summary.created = len(new_runs)
    summary.superseded = len(superseded)
    summary.restored = _update_in_batches(restored, withdrawn=False, withdrawn_at=None)
    summary.withdrawn = _update_in_batches(withdrawn, withdrawn=True, withdrawn_at=timezone.now())
    run_keys_fill(runs=BenchmarkRun.objects.filter(first_import=record))
    keys = {run.comparison_key for run in new_runs} | set(
        BenchmarkRun.objects.filter(pk__in=[*superseded, *restored, *withdrawn]).values_list(
            "comparison_key", flat=True
        )
    )
    groups_rerank(keys=keys)
    for name, value in summary.as_dict().items():
        setattr(record, name, value)
    record.kernels = sorted({run.kernel["slug"] for run in new_rows})
    record.save()
    generation_bump()
    return summary


def _value(row) -> tuple:
    metrics = row.run["source_metrics"]
    return (*(metrics[k] for k in ("mean", "std", "min", "max", "num_trials")), row.workload["digest"])


def _last_runs(source) -> dict[str, dict]:
    """The last run of each upstream key (the one nothing supersedes), with its value."""
    last = {}
    runs = BenchmarkRun.objects.filter(source=source, superseded_by__isnull=True).values_list(
        "pk", "upstream_key", "withdrawn", "source_metrics", "workload__digest"
    )
    for pk, key, withdrawn, metrics, workload in runs:
        value = (*(metrics[k] for k in ("mean", "std", "min", "max", "num_trials")), workload)
        last[key] = {"pk": pk, "withdrawn": withdrawn, "value": value}
    return last


def bundled_load(*, progress=None) -> VersionsSummary:
    return kernelbench_import(path=BUNDLED, progress=progress)


# --- controlled runs: a problem's reference measured by KernelIndex's harness -------------------

CPU_FILE_KEYS = {  # the implementation each harness configuration is, as a timing file names it
    "eager": "baseline_time_torch.json",
    "compile-inductor-default": "baseline_time_torch_compile_inductor_default.json",
}


def cpu_protocol(timing_settings: dict) -> dict:
    """`kernelindex-cpu-v1` for a KernelBench problem: KernelIndex's sampling loop around the
    problem's reference Model, on the CPU; the same description for every such job."""
    return {
        "name": "kernelindex-cpu-v1",
        "harness": "KernelBench problem reference (registry.sources.kernelbench.harness)",
        "harnessRepository": protocols.REPOSITORY,
        "timer": "CPU wall clock (time.perf_counter), one call per sample",
        "statistic": "median",
        "quantiles": [0.5, 0.2, 0.8],
        "comparabilityFamily": "kernelindex/cpu-v1",
        "stopping": {
            "minSamples": timing_settings["min_samples"],
            "confidence": timing_settings["confidence"],
            "precision": timing_settings["precision"],
            "interval": "distribution-free interval of the median from order statistics",
            "warmupMs": timing_settings["warmup_ms"],
            "warmupCalls": timing_settings["warmup_calls"],
        },
        "notes": "The problem file's Model(*get_init_inputs()) called on get_inputs() under "
        "torch.no_grad, in a child process, sampled by KernelIndex's loop (docs/protocol.md); "
        "upstream's own figure (3 warm-up calls, 100 timed calls, mean) is kept beside it. Not "
        "comparable with any GPU timing, nor with KernelBench's published figures.",
    }


@transaction.atomic
def kernelbench_measurement_record(
    *, of: BenchmarkRun, implementation: str, result: dict, timing_settings: dict
):
    """Record a harness result (harness.run_spec on the CPU) for the workload of the KernelBench
    run `of`: a finished measure job holding the raw samples, and the `measured` controlled run
    it made, in one transaction."""
    from registry.models import EvidenceLevel
    from registry.reruns.models import JobKind, JobState, RerunJob
    from registry.reruns.services.measured_run import controlled_source, measured_run_create

    now = timezone.now().replace(microsecond=0)
    protocol_spec = cpu_protocol(timing_settings)
    job = RerunJob.objects.create(
        kind=JobKind.MEASURE,
        state=JobState.SUCCEEDED,
        kernel=of.kernel,
        workload=of.workload,
        provider=implementation,
        operation_mode=of.operation_mode,
        metric=of.metric,
        gpu_slug="cpu",
        reason=f"KernelBench reference under kernelindex-cpu-v1 ({implementation})",
        attempts=1,
        started_at=now,
        finished_at=now,
        unit="ms",
        **{
            k: result[k]
            for k in ("median", "p20", "p80", "ci_low", "ci_high", "samples", "sampling", "upstream")
        },
        environment=result["environment"],
        protocol=protocol_spec,
    )
    source = controlled_source()
    environment, protocol = _cpu_environment(result["environment"]), _cpu_protocol_fields(protocol_spec)
    impl = importer.implementation_fields(
        of.kernel.slug, CPU_FILE_KEYS[implementation], revision=str(result["environment"].get("torch", ""))
    )
    comparison_key = digests.comparison_key(
        kernel=of.kernel.slug,
        operation_mode=of.operation_mode,
        metric=of.metric,
        workload_digest=of.workload.digest,
        family=protocol["comparability_family"],
        gpu="CPU",
    )
    run = _cpu_run_fields(of, implementation, result, now, job.pk, comparison_key)
    results = {
        "median": result["median"],
        "p20": result["p20"],
        "p80": result["p80"],
        "samples": result["samples"],
    }
    if result.get("ci_low") is not None:
        results["medianInterval95"] = [result["ci_low"], result["ci_high"]]
    run["manifest"] = importer.manifest_of(
        run,
        {"slug": of.kernel.slug},
        impl,
        {"spec": of.workload.spec, "digest": of.workload.digest},
        protocol,
        environment,
        source={"name": source.name, "url": source.url, "license": source.license},
        results=results,
    )
    run["digest"] = digests.digest(run["manifest"])
    created = measured_run_create(
        source=source,
        kernel=of.kernel,
        workload=of.workload,
        implementation=impl,
        protocol=protocol,
        environment=environment,
        run={**run, "evidence_level": EvidenceLevel.MEASURED},
    )
    job.result_run = created
    job.save(update_fields=["result_run"])
    generation_bump()
    return created


def _cpu_environment(captured: dict) -> dict:
    spec = {
        "gpu": {"name": "CPU"},
        "vendor": "",
        "product": "CPU",
        "formFactor": "",
        "architecture": captured.get("machine", ""),
        "software": {k: str(captured[k]) for k in ("torch", "python") if captured.get(k)},
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


def _cpu_protocol_fields(spec: dict) -> dict:
    return {
        **digests.protocol_row(spec, slug="kernelindex-cpu-v1-kernelbench", statistic="median"),
        "digest": digests.digest(spec),
    }


def _cpu_run_fields(of, implementation: str, result: dict, now, job_pk: int, comparison_key: str) -> dict:
    return {
        "operation_mode": of.operation_mode,
        "metric": of.metric,
        "unit": "ms",
        "median": result["median"],
        "p20": result["p20"],
        "p80": result["p80"],
        "source_metrics": {"ms_20": result["p20"], "ms_50": result["median"], "ms_80": result["p80"]},
        "observed_at": now,
        "source_status": "not asserted",
        "correctness_note": "The harness times the problem's reference; it compares no outputs.",
        "external_id": f"{of.kernel.slug}/{implementation}/cpu/{of.workload.slug}/{now:%Y-%m-%d-%H-%M-%S}-job{job_pk}",
        "upstream_key": digests.digest([of.kernel.slug, implementation, of.workload.digest, "cpu"]),
        "labels": {"job": job_pk},
        "comparison_key": comparison_key,
    }
