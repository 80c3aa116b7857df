"""Targets whose job ran past the sweep's time limit, or ran out of the card's memory on both of
its attempts, kept beside the exports (`<out>/timeouts-<gpu>.tsv`, one line each, its `cause`
saying which) so that a later sweep does not spend its card on them again: a GPU hour is scarce, a
job that did not finish in six minutes will not finish in the next sweep's either, and a workload
that needs more memory than the GPU model has will not fit on another card of that model.

A job that ran past the limit covers its own target and every target of the same kernel and
provider, of any pass and metric, on a workload of the same configuration swept to the same value
or further (the passes of a provider run the same upstream code, which does not get cheaper as the
workload grows). A sweep given a longer time limit (`--job-timeout`) than a recorded job ran tries
its targets again. A job out of memory covers the same, but only of its own pass (a forward pass
may fit where the full pass, which keeps its activations for the backward, does not), whatever the
time limit. Written whole (beside it, then renamed), like the exports. A file written before the
`cause` column holds timeouts only.
"""

import csv
import io
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from registry.models import Workload
from registry.reruns.controlled import whole_file_write
from registry.reruns.models import RerunJob

TIME_LIMIT = "time limit"
# The harness's kind of failure when the allocator refuses (harness.runner._failure).
OUT_OF_MEMORY = "out of memory"
CAUSES = (TIME_LIMIT, OUT_OF_MEMORY)


@dataclass(frozen=True)
class Timeout:
    kernel: str
    provider: str
    operation_mode: str
    metric: str
    workload: str  # the workload's digest: row ids differ from one registry to the next
    x_name: str
    x_value: float
    ran_s: float  # how long the job ran without a result before it was killed or given up
    gpu_uuid: str
    started_at: str
    error: str
    cause: str = TIME_LIMIT  # one of CAUSES

    @property
    def key(self) -> tuple:
        return (self.kernel, self.provider, self.operation_mode, self.metric, self.workload)

    def applies(self, *, job_timeout_s: float) -> bool:
        """Whether a sweep under `job_timeout_s` should leave what this covers untried."""
        return self.cause == OUT_OF_MEMORY or self.ran_s >= job_timeout_s

    @classmethod
    def from_job(cls, job: RerunJob, *, ran_s: float, cause: str = TIME_LIMIT) -> "Timeout":
        return cls(
            kernel=job.kernel.slug,
            provider=job.provider,
            operation_mode=job.operation_mode,
            metric=job.metric,
            workload=job.workload.digest,
            x_name=job.workload.x_name,
            x_value=job.workload.x_value if job.workload.x_value is not None else 0.0,
            ran_s=round(ran_s, 1),
            gpu_uuid=job.gpu_uuid,
            started_at=job.started_at.isoformat() if job.started_at else "",
            error=" ".join(job.error.split())[:300],
            cause=cause,
        )


FIELDS = tuple(field.name for field in fields(Timeout))
OPTIONAL = ("cause",)


def out_of_memory(job: RerunJob) -> bool:
    """A job that failed because the harness ran out of the card's memory."""
    return job.error.startswith(f"Harness failed: {OUT_OF_MEMORY}:")


class TimeoutsFileError(ValueError):
    pass


def timeouts_path(out: Path, gpu_slug: str) -> Path:
    return Path(out) / f"timeouts-{gpu_slug}.tsv"


def timeouts_read(out: Path, gpu_slug: str) -> list[Timeout]:
    """The recorded timeouts of `gpu_slug` in `out` ([] where there is no file); a malformed file
    is an error naming the file and the line."""
    path = timeouts_path(out, gpu_slug)
    if not path.exists():
        return []
    reader = csv.DictReader(io.StringIO(path.read_text()), delimiter="\t")
    missing = sorted(set(FIELDS) - set(OPTIONAL) - set(reader.fieldnames or ()))
    if missing:
        raise TimeoutsFileError(f"{path}: line 1: the header lacks {', '.join(missing)}")
    entries = []
    for line, row in enumerate(reader, start=2):
        cause = row.get("cause") or TIME_LIMIT
        if cause not in CAUSES:
            raise TimeoutsFileError(
                f"{path}: line {line}: cause must be one of {', '.join(map(repr, CAUSES))}, got {cause!r}"
            )
        try:
            entries.append(
                Timeout(
                    **{name: row[name] or "" for name in FIELDS if name not in ("x_value", "ran_s", "cause")},
                    x_value=float(row["x_value"]),
                    ran_s=float(row["ran_s"]),
                    cause=cause,
                )
            )
        except (TypeError, ValueError):
            raise TimeoutsFileError(
                f"{path}: line {line}: x_value and ran_s must be numbers, got {row.get('x_value')!r} "
                f"and {row.get('ran_s')!r}"
            ) from None
    return entries


def timeouts_write(out: Path, gpu_slug: str, entries: list[Timeout]) -> Path:
    """Write `entries` with those already recorded, one line per target: one out of memory
    first (it applies under any limit), else the longest run."""
    by_key = {}
    for entry in [*timeouts_read(out, gpu_slug), *entries]:
        if entry.key not in by_key or _weight(entry) > _weight(by_key[entry.key]):
            by_key[entry.key] = entry
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    for key in sorted(by_key):
        writer.writerow(asdict(by_key[key]))
    path = timeouts_path(out, gpu_slug)
    whole_file_write(path, buffer.getvalue().encode())
    return path


def _weight(entry: Timeout) -> tuple:
    return (entry.cause == OUT_OF_MEMORY, entry.ran_s)


def timed_out_targets(targets: list, entries: list[Timeout], *, job_timeout_s: float) -> set:
    """Of `targets` (targets.Target), those a recorded job covers: one out of memory, or one that ran
    at least `job_timeout_s` (the module's docstring says which); in two queries."""
    kernels = {target.kernel for target in targets}
    entries = [
        entry for entry in entries if entry.applies(job_timeout_s=job_timeout_s) and entry.kernel in kernels
    ]
    if not entries:
        return set()
    recorded = Workload.objects.in_bulk([entry.workload for entry in entries], field_name="digest")
    workloads = Workload.objects.in_bulk({target.workload_id for target in targets})
    covered = set()
    for entry in entries:
        at = recorded.get(entry.workload)
        if at is None:  # a workload this registry does not hold
            continue
        for target in targets:
            workload = workloads[target.workload_id]
            if (
                (target.kernel, target.provider) == (entry.kernel, entry.provider)
                and (entry.cause != OUT_OF_MEMORY or target.operation_mode == entry.operation_mode)
                and workload.x_name == at.x_name
                and _configuration(workload) == _configuration(at)
                and (workload.x_value or 0) >= (at.x_value or 0)
            ):
                covered.add(target)
    return covered


def _configuration(workload: Workload) -> dict:
    """The workload's parameters but its swept one."""
    return {name: value for name, value in workload.parameters.items() if name != workload.x_name}
