"""Importing source data: runs created, kept, superseded or withdrawn, and group ranks."""

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from registry import digests
from registry.importers import liger
from registry.models import (
    BenchmarkRun,
    Environment,
    Implementation,
    Kernel,
    Protocol,
    Source,
    SourceImport,
    Workload,
)
from registry.services.run_keys import run_keys_fill

BUNDLED_LIGER_CSV = (
    Path(__file__).resolve().parent.parent / "data" / "liger-kernel" / "all_benchmark_data.csv"
)
BATCH_SIZE = 1000


@dataclass
class ImportSummary:
    rows: int = 0
    created: int = 0
    unchanged: int = 0
    superseded: int = 0
    withdrawn: int = 0
    restored: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.rows} rows: {self.created} created, {self.unchanged} unchanged, "
            f"{self.superseded} superseded, {self.withdrawn} withdrawn"
            + (f", {self.restored} listed again" if self.restored else "")
        )


class ImportRejected(Exception):
    """The file cannot be imported; nothing was written."""


@transaction.atomic
def liger_import(
    *,
    path: Path | str,
    release: str = "",
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Import one Liger benchmark CSV: new rows become runs, replaced rows supersede their old
    run, rows no longer listed are marked withdrawn. All of it or none of it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportRejected(f"{path}: cannot read the file ({exc.strerror})") from None
    try:
        rows = liger.parse_file(data, variant=liger.variant_of(path.name))
        source = _source_get_or_create(liger.SOURCE)
        record = SourceImport.objects.create(
            source=source,
            filename=path.name,
            file_digest=digests.file_digest(data),
            release=release,
            rows=len(rows),
        )
        summary = _runs_sync(source=source, rows=rows, record=record, progress=progress)
    except liger.LigerFormatError as exc:
        raise ImportRejected(f"{path.name}: {exc}") from None
    for field, value in summary.as_dict().items():
        setattr(record, field, value)
    record.save()
    run_keys_fill(runs=BenchmarkRun.objects.filter(first_import=record))
    return summary


def _source_get_or_create(spec: dict) -> Source:
    source, _ = Source.objects.get_or_create(
        slug=spec["slug"], defaults={k: v for k, v in spec.items() if k != "slug"}
    )
    return source


def _runs_sync(*, source, rows, record, progress) -> ImportSummary:
    summary = ImportSummary(rows=len(rows))
    kernels = _kernels_ensure(rows)
    specs = {
        model: _specs_ensure(model, rows, attribute, kernels)
        for model, attribute in (
            (Implementation, "implementation"),
            (Workload, "workload"),
            (Protocol, "protocol"),
            (Environment, "environment"),
        )
    }
    existing = {
        external_id: (pk, digest, withdrawn)
        for external_id, pk, digest, withdrawn in BenchmarkRun.objects.filter(source=source).values_list(
            "external_id", "pk", "digest", "withdrawn"
        )
    }
    new_runs, restored, listed = [], [], set()
    for done, row in enumerate(rows, start=1):
        run = row.run
        listed.add(run["external_id"])
        known = existing.get(run["external_id"])
        if known is None:
            new_runs.append(_run_build(row, source, record, kernels, specs))
        elif known[1] != run["digest"]:
            raise liger.LigerFormatError(
                f"run {run['external_id']} is already published with other values; "
                "a changed row needs a new timestamp",
                line=row.line,
            )
        else:
            summary.unchanged += 1
            if known[2]:
                restored.append(known[0])
        if progress and done % 100 == 0:
            progress(100)
    if progress:
        progress(len(rows) % 100)
    BenchmarkRun.objects.bulk_create(new_runs, batch_size=BATCH_SIZE)
    summary.created = len(new_runs)
    if restored:
        summary.restored = BenchmarkRun.objects.filter(pk__in=restored).update(
            withdrawn=False, withdrawn_at=None
        )
    summary.superseded = _runs_supersede(source, new_runs)
    summary.withdrawn = _runs_withdraw(source, _same_variant(source, existing, rows), listed)
    changed_keys = {r.comparison_key for r in new_runs}
    if summary.superseded or summary.withdrawn or restored:
        changed_keys = None  # cheaper to re-rank every group of the source than to track them
    groups_rerank(keys=changed_keys, source=source)
    return summary


def _kernels_ensure(rows) -> dict[str, Kernel]:
    wanted = {row.kernel["slug"]: row.kernel for row in rows}
    kernels = {k.slug: k for k in Kernel.objects.filter(slug__in=wanted)}
    missing = [Kernel(**spec) for slug, spec in wanted.items() if slug not in kernels]
    Kernel.objects.bulk_create(missing, batch_size=BATCH_SIZE)
    kernels.update({k.slug: k for k in Kernel.objects.filter(slug__in=[k.slug for k in missing])})
    return kernels


def _specs_ensure(model, rows, attribute, kernels) -> dict[str, object]:
    """Content-addressed rows: find each spec by digest, create the ones not seen before."""
    wanted = {}
    for row in rows:
        spec = getattr(row, attribute)
        wanted.setdefault(spec["digest"], (spec, row.kernel["slug"]))
    found = {obj.digest: obj for obj in model.objects.filter(digest__in=wanted)}
    with_kernel = model in (Implementation, Workload)
    missing = [
        model(**spec, **({"kernel": kernels[kernel]} if with_kernel else {}))
        for digest, (spec, kernel) in wanted.items()
        if digest not in found
    ]
    model.objects.bulk_create(missing, batch_size=BATCH_SIZE)
    found.update({obj.digest: obj for obj in model.objects.filter(digest__in=[m.digest for m in missing])})
    return found


def _run_build(row, source, record, kernels, specs) -> BenchmarkRun:
    return BenchmarkRun(
        source=source,
        first_import=record,
        kernel=kernels[row.kernel["slug"]],
        implementation=specs[Implementation][row.implementation["digest"]],
        workload=specs[Workload][row.workload["digest"]],
        protocol=specs[Protocol][row.protocol["digest"]],
        environment=specs[Environment][row.environment["digest"]],
        **row.run,
    )


def _runs_supersede(source, new_runs) -> int:
    """A row upstream replaced (same upstream key, new timestamp or version) supersedes the run
    it replaced; the old run stays, with everything attached to it."""
    newest = {}
    for run in sorted(new_runs, key=lambda r: r.observed_at):
        newest[run.upstream_key] = run.external_id
    if not newest:
        return 0
    new_ids = dict(
        BenchmarkRun.objects.filter(external_id__in=newest.values()).values_list("external_id", "pk")
    )
    replaced = (
        BenchmarkRun.objects.filter(source=source, upstream_key__in=newest, superseded_by__isnull=True)
        .exclude(external_id__in=newest.values())
        .values_list("pk", "upstream_key", "observed_at")
    )
    updates = []
    for pk, upstream_key, _observed_at in replaced:
        updates.append(BenchmarkRun(pk=pk, superseded_by_id=new_ids[newest[upstream_key]]))
    BenchmarkRun.objects.bulk_update(updates, ["superseded_by"], batch_size=BATCH_SIZE)
    return len(updates)


def _runs_withdraw(source, existing, listed) -> int:
    """Rows the source no longer lists are marked withdrawn, never deleted; a run already
    replaced by a newer row counts as superseded, not withdrawn."""
    gone = [
        pk
        for external_id, (pk, _, withdrawn) in existing.items()
        if external_id not in listed and not withdrawn
    ]
    count = 0
    for start in range(0, len(gone), BATCH_SIZE):
        count += BenchmarkRun.objects.filter(
            pk__in=gone[start : start + BATCH_SIZE], superseded_by__isnull=True
        ).update(withdrawn=True, withdrawn_at=timezone.now())
    return count


def _same_variant(source, existing: dict, rows) -> dict:
    """The runs a file speaks for: those of its own suite (variant). all_benchmark_data.csv does
    not withdraw the runs of all_benchmark_data_cutile.csv, nor the other way round."""
    variant = rows[0].run["labels"].get("variant", "")
    runs = BenchmarkRun.objects.filter(source=source)
    runs = runs.filter(labels__variant=variant) if variant else runs.exclude(labels__has_key="variant")
    ours = set(runs.values_list("external_id", flat=True))
    return {external_id: known for external_id, known in existing.items() if external_id in ours}


def groups_rerank(*, keys: Iterable[str] | None = None, source: Source | None = None) -> None:
    """Store each run's rank in its comparison group (1 = lowest median; ties share a rank).
    Only current runs are ranked; withdrawn and superseded runs keep no rank."""
    runs = BenchmarkRun.objects.all()
    if keys is not None:
        keys = list(keys)
        if not keys:
            return
        runs = runs.filter(comparison_key__in=keys)
    elif source is not None:
        runs = runs.filter(
            comparison_key__in=BenchmarkRun.objects.filter(source=source).values("comparison_key")
        )
    groups: dict[str, list] = {}
    stale = []
    for pk, key, median, withdrawn, superseded, rank, size in runs.values_list(
        "pk", "comparison_key", "median", "withdrawn", "superseded_by", "rank", "group_size"
    ):
        if withdrawn or superseded:
            if rank is not None or size is not None:
                stale.append(BenchmarkRun(pk=pk, rank=None, group_size=None))
        else:
            groups.setdefault(key, []).append((pk, median, rank, size))
    updates = stale
    for members in groups.values():
        ranks = digests.competition_ranks([median for _, median, _, _ in members])
        for (pk, _, old_rank, old_size), rank in zip(members, ranks, strict=True):
            if (old_rank, old_size) != (rank, len(members)):
                updates.append(BenchmarkRun(pk=pk, rank=rank, group_size=len(members)))
    BenchmarkRun.objects.bulk_update(updates, ["rank", "group_size"], batch_size=BATCH_SIZE)


def bundled_data_load(*, progress=None) -> dict[str, ImportSummary]:
    """Everything the project ships: the Liger data (and, as they are added, controlled runs)."""
    return {"liger-kernel": liger_import(path=BUNDLED_LIGER_CSV, progress=progress)}
