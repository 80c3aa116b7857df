"""Re-derive what the registry stores from what it certifies: every run's digest from its
manifest, the manifest's agreement with the run's own fields, every comparison group's ranks, and
one current run per target (implementation) in each group, and each controlled run's stored
interval from its measurement's samples. `manage.py verify_registry` reports each disagreement;
nothing here writes."""

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

from registry import digests
from registry.competition_ranks import competition_ranks
from registry.models import BenchmarkRun

CHUNK = 2000


@dataclass(frozen=True)
class Mismatch:
    run_pk: int
    external_id: str
    what: str

    def __str__(self):
        return f"run {self.run_pk} ({self.external_id}): {self.what}"


_FIELDS = (
    "pk",
    "external_id",
    "digest",
    "manifest",
    "median",
    "p20",
    "p80",
    "operation_mode",
    "metric",
    "unit",
    "comparison_key",
    "kernel__slug",
    "workload__digest",
    "protocol__digest",
    "environment__digest",
    "withdrawn",
    "superseded_by",
    "rank",
    "group_size",
    "implementation",
)


def registry_verify() -> Iterator[Mismatch]:
    """Every mismatch, runs first (one pass, in primary-key order), then ranks."""
    groups: dict[str, list[tuple]] = {}
    rows = BenchmarkRun.objects.order_by("pk").values_list(*_FIELDS).iterator(chunk_size=CHUNK)
    for row in rows:
        run = dict(zip(_FIELDS, row, strict=True))
        yield from _run_mismatches(run)
        current = not run["withdrawn"] and run["superseded_by"] is None
        if current:
            groups.setdefault(run["comparison_key"], []).append(run)
        elif run["rank"] is not None or run["group_size"] is not None:
            yield _mismatch(run, f"not current, yet ranked {run['rank']} of {run['group_size']}")
    for members in groups.values():
        yield from _group_mismatches(members)
    yield from _stored_interval_mismatches()


def _stored_interval_mismatches() -> Iterator[Mismatch]:
    """A controlled run's rank interval is its measure job's stored judged interval: it must be
    the one its samples give (judged.judged_interval), or the ranks say what the samples do not."""
    from registry.evidence import measure_jobs_with_samples, stored_interval_of

    for job in measure_jobs_with_samples():
        stored, derived = stored_interval_of(job)
        if not _same_interval(stored, derived):
            yield Mismatch(
                job.result_run_id,
                job.result_run.external_id,
                f"its measurement's stored interval is {stored}, but its samples give {derived}",
            )


def _mismatch(run, what: str) -> Mismatch:
    return Mismatch(run["pk"], run["external_id"], what)


def _run_mismatches(run) -> Iterator[Mismatch]:
    manifest = run["manifest"]
    derived = "sha256:" + hashlib.sha256(digests.canonical_bytes(manifest)).hexdigest()
    if derived != run["digest"]:
        yield _mismatch(run, f"digest {run['digest']} but the manifest's is {derived}")
    try:
        item = manifest["items"][0]
        spec, metadata = item["spec"], item["metadata"]
        results = spec["results"]
        protocol, environment = manifest["items"][1]["spec"], manifest["items"][2]["spec"]
        # A source that publishes a mean (KernelBench) states it alone: the columns hold it as
        # the primary statistic, with p20 and p80 equal to it.
        primary = results["mean"] if results.get("statistic") == "mean" else results["median"]
        stated = {
            "median": primary,
            "p20": results.get("p20", primary),
            "p80": results.get("p80", primary),
            "operation_mode": spec["operationMode"],
            "metric": spec["metric"],
            "unit": spec["unit"],
            "comparison_key": spec["comparisonKey"],
            "external_id": metadata["externalId"],
            "kernel__slug": spec["kernel"],
            "workload__digest": spec["workload"]["digest"],
            "protocol__digest": spec["protocolRef"],
            "environment__digest": spec["environmentRef"],
        }
        key = digests.comparison_key(
            kernel=spec["kernel"],
            operation_mode=spec["operationMode"],
            metric=spec["metric"],
            workload_digest=spec["workload"]["digest"],
            family=protocol["comparabilityFamily"],
            gpu=environment["product"],
        )
    except (KeyError, IndexError, TypeError) as exc:
        yield _mismatch(run, f"the manifest lacks {exc}")
        return
    for field, value in stated.items():
        if run[field] != value:
            yield _mismatch(run, f"{field} is {run[field]!r} but the manifest says {value!r}")
    if key != spec["comparisonKey"]:
        yield _mismatch(run, f"the manifest's comparison key is not the digest of its own parts ({key})")


def _same_interval(a: tuple, b: tuple) -> bool:
    if None in a or None in b:
        return a == b
    return all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(a, b, strict=True))


def _group_mismatches(members: list[dict]) -> Iterator[Mismatch]:
    yield from _targets_measured_twice(members)
    ranks = competition_ranks([run["median"] for run in members])
    for run, rank in zip(members, ranks, strict=True):
        if (run["rank"], run["group_size"]) != (rank, len(members)):
            yield _mismatch(
                run,
                f"ranked {run['rank']} of {run['group_size']}, but its group's medians make it "
                f"{rank} of {len(members)}",
            )


def _targets_measured_twice(members: list[dict]) -> Iterator[Mismatch]:
    """Two current runs of one implementation in one group: the site would rank it against itself.
    The database refuses it (one_current_run_per_target); a registry restored from elsewhere, or a
    database without the constraint, is checked here."""
    first: dict[int, dict] = {}
    for run in members:
        earlier = first.setdefault(run["implementation"], run)
        if earlier is not run:
            yield _mismatch(
                run,
                f"a second current run of implementation {run['implementation']} in its comparison "
                f"group, beside run {earlier['pk']}: one of them should supersede the other",
            )
