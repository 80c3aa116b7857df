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
from registry.services.changes import changes_detect
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
from registry.sources.kernelbench import history, importer, protocols
from registry.sources.kernelbench.gpu_sweep import BUNDLED, GPU_DIR


@dataclass
class _Prepared:
    version: history.Version
    rows: list  # history.Row, one per key
    texts: dict  # each problem file's text, by blob
    cache: dict  # what build_row shares between rows, shared by every version

    def value(self, row) -> tuple[str, tuple]:
        return importer.row_value(row, text=self.texts.get(row.problem_blob), cache=self.cache)

    def build(self, row) -> importer.KernelBenchRow:
        version = self.version
        return importer.build_row(
            row,
            commit=version.commit,
            date=version.date,
            text=self.texts.get(row.problem_blob),
            cache=self.cache,
        )


def _prepare(version: history.Version, cache: dict) -> _Prepared:
    """Read and check one version; raises on the first problem. A row's records are built only
    when the import finds its figures changed (most rows of a version are its predecessor's)."""
    texts: dict[str, str] = {}
    kept, seen = [], set()
    for row in version.rows():
        if row.key in seen:
            continue  # the same file listed under old/ and beside it, with the same values
        seen.add(row.key)
        blob = row.problem_blob
        if blob is not None and blob not in texts:
            texts[blob] = version.problem_text(blob)
        kept.append(row)
    return _Prepared(version, kept, texts, cache)


def kernelbench_import(*, path: Path | str, progress=None) -> VersionsSummary:
    try:
        versions = history.versions(path)
        done = set(
            SourceImport.objects.filter(
                source__slug=protocols.SOURCE["slug"], upstream_commit__in=[v.commit for v in versions]
            ).values_list("upstream_commit", flat=True)
        )
        cache: dict = {}
        prepared = [_prepare(v, cache) for v in versions if v.commit not in done]
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
        key, value = prepared.value(row)
        listed.add(key)
        known = last.get(key)
        if known is not None and known["value"] == value:
            summary.unchanged += 1
            if known["withdrawn"]:
                restored.append(known["pk"])
            continue
        new_rows.append(prepared.build(row))
    new_runs = _runs_build(new_rows, source, record)
    for run in new_runs:
        known = last.get(run.upstream_key)
        if known is not None:
            superseded[known["pk"]] = run.pk
    withdrawn = [known["pk"] for key, known in last.items() if key not in listed and not known["withdrawn"]]
    # One current run per target (a database constraint) after every statement: the runs a new
    # value replaces point at it before it is written (foreign keys are checked at commit).
    _superseded_by_write(superseded)
    _runs_insert(new_runs)
    summary.created = len(new_runs)
    summary.superseded = len(superseded)
    summary.restored = _update_in_batches(restored, withdrawn=False, withdrawn_at=None)
    summary.withdrawn = _update_in_batches(withdrawn, withdrawn=True, withdrawn_at=timezone.now())
    keys = {run.comparison_key for run in new_runs} | set(
        BenchmarkRun.objects.filter(pk__in=[*superseded, *restored, *withdrawn]).values_list(
            "comparison_key", flat=True
        )
    )
    groups_rerank(keys=keys)
    if superseded:  # a new value of a published mean: a step of its series (Welch's test)
        changes_detect(runs=BenchmarkRun.objects.filter(pk__in=superseded.values()))
    for name, value in summary.as_dict().items():
        setattr(record, name, value)
    record.kernels = sorted({run.kernel["slug"] for run in new_rows})
    record.save()
    generation_bump()
    return summary


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


def bundled_load(*, progress=None) -> dict:
    """Upstream's history, then what KernelIndex's GPU hosts measured of its problems
    (data/gpu/*.jsonl.gz, by name: a card's first measurements before another card's reruns)."""
    from registry.sources.kernelbench.measurements import gpu_sweep_record

    loaded = {"kernelbench": kernelbench_import(path=BUNDLED, progress=progress)}
    for file in sorted(GPU_DIR.glob("*.jsonl.gz")):
        outcome = gpu_sweep_record(path=file)
        loaded[f"kernelbench {file.name}"] = ", ".join(f"{n} {what}" for what, n in sorted(outcome.items()))
    return loaded
