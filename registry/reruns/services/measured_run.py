"""A controlled run as a registry record: its spec rows, its manifest and digest, its rank.

One service, `measured_run_create`, puts a controlled run into the registry, whether the recorder
has just measured it (`measured_run_from_job`) or the controlled-run loader reads it from a file
that another installation exported.
"""

from dataclasses import dataclass
from datetime import UTC

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry import digests
from registry.models import (
    CONTROLLED_SOURCE_SLUG,
    BenchmarkRun,
    Environment,
    EvidenceLevel,
    Implementation,
    Kernel,
    Protocol,
    Source,
    Workload,
)
from registry.reruns.harness import protocol_for
from registry.reruns.models import RerunJob
from registry.reruns.services.worker import CPU_SLUG, job_device
from registry.services.imports import groups_rerank
from registry.services.run_keys import RUN_KEY_SOURCES, run_keys_fill
from registry.sources import rerun_plugin
from registry.speed_of_light import measured_ceilings, sol_fields

CONTROLLED_SOURCE = {
    "slug": CONTROLLED_SOURCE_SLUG,
    "name": "KernelIndex controlled runs",
    "url": "https://github.com/linkedin/Liger-Kernel/tree/main/benchmark/scripts",
    "license": "CC-BY-4.0",
    "license_url": "https://creativecommons.org/licenses/by/4.0/",
    "description": "Runs measured by KernelIndex's own workers: the upstream Liger-Kernel benchmark "
    "functions on exactly the recorded workload, with raw samples and the captured environment.",
}
# The software versions a worker captures that a controlled run's environment names.
SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton", "liger_kernel", "transformers", "python")


def controlled_source() -> Source:
    return Source.objects.get_or_create(
        slug=CONTROLLED_SOURCE["slug"], defaults={k: v for k, v in CONTROLLED_SOURCE.items() if k != "slug"}
    )[0]


def spec_row(model, fields: dict, *, by: str = "digest", cache: dict | None = None, **extra):
    """Specs are content-addressed: the row with `fields["digest"]` (a kernel: `by="slug"`),
    created the first time. A writer of many runs passes one `cache` (a dict) to look each spec
    up once."""
    key = (model, fields[by])
    if cache is not None and key in cache:
        return cache[key]
    row, _ = model.objects.get_or_create(**{by: fields[by]}, defaults={**fields, **extra})
    if cache is not None:
        cache[key] = row
    return row


def measured_run_build(
    *,
    source: Source,
    kernel: Kernel,
    workload: Workload,
    implementation: dict,
    protocol: dict,
    environment: dict,
    run: dict,
    specs: dict | None = None,
    ceilings: dict | None = None,
) -> BenchmarkRun:
    """An unsaved controlled run from the fields of its spec rows (created as needed) and its own
    (manifest, digest and evidence level included), with its speed of light, as an import writes
    its runs' (imports._runs_build). `specs` and `ceilings` let a writer of many runs look each
    spec and the measured ceilings up once."""
    environment_row = spec_row(Environment, environment, cache=specs)
    sol = sol_fields(
        kernel=kernel.slug,
        workload=workload,
        operation_mode=run["operation_mode"],
        metric=run["metric"],
        median=run["median"],
        gpu_slug=environment_row.slug,
        measured=measured_ceilings() if ceilings is None else ceilings,
    )
    return BenchmarkRun(
        source=source,
        kernel=kernel,
        workload=workload,
        implementation=spec_row(Implementation, implementation, cache=specs, kernel=kernel),
        protocol=spec_row(Protocol, protocol, cache=specs),
        environment=environment_row,
        **run,
        **sol,
    )


@transaction.atomic
def measured_runs_create(runs: list[BenchmarkRun]) -> list[BenchmarkRun]:
    """Write built runs (measured_run_build) in bulk, then rank their comparison groups again and
    fill their keys, so each run is in its group the moment it exists.

    One current run per target (a comparison group and an implementation, docs/reruns.md): a
    target measured again keeps its latest measurement current and the earlier ones superseded by
    it, whether the earlier one is in the registry already or in the same batch. The current run
    of each target is written first (pointing at the run it replaces, so that two current runs
    never exist, even for one statement), then the runs it supersedes, then the pointers move."""
    existing = _current_runs_of_targets(runs)
    latest: dict[tuple, BenchmarkRun] = {}
    for run in sorted([*existing.values(), *runs], key=lambda r: r.observed_at):  # stable: new wins a tie
        latest[target_of(run)] = run
    replaced = {}  # existing run pk -> the new run that supersedes it
    for target, run in existing.items():
        if latest[target] is not run:
            replaced[run.pk] = latest[target]
            latest[target].superseded_by_id = run.pk  # for the moment: cleared below
    first = [run for run in runs if latest[target_of(run)] is run]
    BenchmarkRun.objects.bulk_create(first, batch_size=500)
    rest = [run for run in runs if latest[target_of(run)] is not run]
    for run in rest:
        run.superseded_by = latest[target_of(run)]
    BenchmarkRun.objects.bulk_create(rest, batch_size=500)
    for pk, run in replaced.items():
        BenchmarkRun.objects.filter(pk=pk).update(superseded_by=run, updated_at=timezone.now())
    BenchmarkRun.objects.filter(pk__in=[run.pk for run in replaced.values()]).update(superseded_by=None)
    for run in replaced.values():
        run.superseded_by = None
    created = runs
    groups_rerank(keys={run.comparison_key for run in created})
    run_keys_fill(runs=BenchmarkRun.objects.filter(pk__in=[run.pk for run in created]))
    return created


def target_of(run: BenchmarkRun) -> tuple:
    """What a run measures, of which only one run is current: its comparison group (kernel, pass,
    metric, workload, protocol family, GPU model) and its implementation (provider and version)."""
    return (run.comparison_key, run.implementation_id)


def _current_runs_of_targets(runs: list[BenchmarkRun]) -> dict[tuple, BenchmarkRun]:
    """The registry's current run of each target among `runs`, in one query."""
    keys = {run.comparison_key for run in runs}
    implementations = {run.implementation_id for run in runs}
    found = (
        BenchmarkRun.objects.current()
        .filter(comparison_key__in=keys, implementation_id__in=implementations)
        .only("pk", "comparison_key", "implementation_id", "observed_at")
    )
    targets = {target_of(run) for run in runs}
    return {target_of(run): run for run in found if target_of(run) in targets}


@transaction.atomic
def measured_run_create(**fields) -> BenchmarkRun:
    """One controlled run (the fields of measured_run_build), created, ranked and keyed."""
    (created,) = measured_runs_create([measured_run_build(**fields)])
    created.refresh_from_db(fields=["rank", "group_size", *RUN_KEY_SOURCES])
    return created


@dataclass(frozen=True)
class MeasuredDescription:
    """What the source of a measured workload says of the run: its spec rows' fields and the
    run's own names. The rerun harness's jobs (Liger's workloads) are described here, through the
    plug-in (`rerun_description`); KernelBench's own measurements describe theirs
    (registry/sources/kernelbench/measurements.py)."""

    implementation: dict
    protocol: dict
    environment: dict
    external_id: str
    upstream_key: str
    labels: dict
    correctness_note: str
    # Whether the manifest's results repeat the source metrics beside the median, p20 and p80 (the
    # rerun harness's runs do; KernelBench's measurements were recorded without, and a digest
    # never changes).
    results_name_source_metrics: bool = True


def measured_run_from_job(*, job: RerunJob, description: MeasuredDescription | None = None) -> BenchmarkRun:
    """The `measured` run of a finished measure job: its manifest and digest built from what the
    worker measured and captured and from how its source describes it (by default the rerun
    harness's source, `rerun_description`). Called inside its caller's transaction (the
    recorder's, or KernelBench's measurement record)."""
    return measured_run_create(
        **measured_run_fields(job=job, description=description, source=controlled_source())
    )


def measured_run_fields(*, job: RerunJob, description: MeasuredDescription | None, source: Source) -> dict:
    """What `measured_run_build` takes for the `measured` run of a finished, saved measure job
    (`measured_run_from_job`; KernelBench's sweep files build many at once)."""
    described = description or rerun_description(job)
    run = _run_fields(job, described)
    run["manifest"] = _manifest(job, run, source, described)
    run["digest"] = digests.digest(run["manifest"])
    return {
        "source": source,
        "kernel": job.kernel,
        "workload": job.workload,
        "implementation": described.implementation,
        "protocol": described.protocol,
        "environment": described.environment,
        "run": {**run, "evidence_level": EvidenceLevel.MEASURED},
    }


def rerun_description(job: RerunJob) -> MeasuredDescription:
    """How the rerun harness's source (Liger's, through the plug-in) describes a job's run."""
    implementation, environment = _implementation_and_environment(job)
    observed_at = _observed_at(job)
    captured = job.environment
    pass_segment = job.operation_mode if job.metric == "latency" else f"{job.operation_mode}-{job.metric}"
    return MeasuredDescription(
        implementation=implementation,
        protocol=_protocol_fields(job),
        environment=environment,
        external_id="/".join(
            [
                job.kernel.slug,
                pass_segment,
                job.provider,
                job.gpu_slug,
                job.workload.slug,
                f"{observed_at:%Y-%m-%d-%H-%M-%S}-job{job.pk}",
            ]
        ),
        upstream_key=digests.digest(
            [job.kernel.slug, job.provider, job.operation_mode, job.metric, job.workload.digest, job.gpu_slug]
        ),
        labels={
            "job": job.pk,
            **({"liger_version": str(captured["liger_kernel"])} if captured.get("liger_kernel") else {}),
        },
        correctness_note="The harness times the upstream benchmark functions; it does not compare "
        "outputs with a reference.",
    )


def _protocol_fields(job: RerunJob) -> dict:
    # The registry's own description of the protocol, not the one the worker reported (that stays
    # on the job): the comparability family it names decides the run's comparison group.
    spec = protocol_for(device=job_device(job), metric=job.metric, timing=settings.CONTROLLED_TIMING)
    fields = digests.protocol_row(spec, slug=spec["comparabilityFamily"].replace("/", "-"))
    return {**fields, "digest": digests.digest(spec)}


def _implementation_and_environment(job: RerunJob) -> tuple[dict, dict]:
    # The jobs measure one source's workloads (Liger's, through its benchmark scripts): that
    # source names its implementation and GPU, through the plug-in.
    captured = job.environment
    software = {key: str(captured[key]) for key in SOFTWARE_KEYS if captured.get(key)}
    fields = rerun_plugin().fields_of_measured(job, software=software, on_cpu=job.gpu_slug == CPU_SLUG)
    return fields["implementation"], fields["environment"]


def _observed_at(job: RerunJob):
    return job.finished_at.replace(microsecond=0)


def _run_fields(job: RerunJob, described: MeasuredDescription) -> dict:
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
        "observed_at": _observed_at(job),
        "source_status": "not asserted",
        "correctness_note": described.correctness_note,
        "external_id": described.external_id,
        "upstream_key": described.upstream_key,
        "labels": described.labels,
        "comparison_key": digests.comparison_key(
            kernel=job.kernel.slug,
            operation_mode=job.operation_mode,
            metric=job.metric,
            workload_digest=job.workload.digest,
            family=described.protocol["comparability_family"],
            gpu=described.environment["product"],
        ),
    }


def _manifest(job: RerunJob, run: dict, source: Source, described: MeasuredDescription) -> dict:
    results = digests.median_results(run)
    if not described.results_name_source_metrics:
        del results["sourceMetrics"]
    results["samples"] = job.samples
    if job.ci_low is not None:
        results["medianInterval95"] = [job.ci_low, job.ci_high]
    implementation, protocol, environment = (
        described.implementation,
        described.protocol,
        described.environment,
    )
    return digests.run_manifest(
        run={**run, "observed_at": run["observed_at"].astimezone(UTC)},
        kernel=job.kernel.slug,
        results=results,
        source={"name": source.name, "url": source.url, "license": source.license},
        implementation=(implementation["spec"], implementation["digest"]),
        workload=(job.workload.spec, job.workload.digest),
        protocol=(protocol["spec"], protocol["digest"]),
        environment=(environment["spec"], environment["digest"], environment["slug"]),
    )
