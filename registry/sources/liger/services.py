"""Liger-Kernel's import services: a published CSV, one version of the data file from the
repository's history, and the whole history; each file or version in one transaction.

The runs are written through the shared run writer (registry.services.imports), so that digests,
keys and ranks are made the one way; what is Liger's own is deciding, from a file, which runs are
new, kept, superseded or withdrawn (a file speaks for its own suite, and a file older than one
already imported only adds the values it published).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from django.db import transaction
from django.db.models import Q
from django.db.models.fields.json import KT
from django.utils import timezone

from registry import digests
from registry.cache import generation_bump
from registry.models import BenchmarkRun, Source, SourceImport
from registry.services.changes import changes_detect
from registry.services.imports import (
    ImportRejected,
    ImportSummary,
    VersionsSummary,
    _group_members,
    _NewRun,
    _ranks_decide,
    _ranks_write,
    _runs_build,
    _runs_insert,
    _source_get_or_create,
    _superseded_by_write,
    _update_in_batches,
    collector_paused,
)
from registry.sources.liger import BUNDLED_CSV, BUNDLED_HISTORY, history
from registry.sources.liger import importer as liger
from registry.sources.liger.importer import MAIN_FILE, SOURCE

BUNDLED_LIGER_CSV = BUNDLED_CSV
BUNDLED_LIGER_HISTORY = BUNDLED_HISTORY


@dataclass(frozen=True)
class UpstreamVersion:
    """One version of the data file in the source's repository."""

    commit: str
    date: datetime
    pull_request: int | None = None
    subject: str = ""


@transaction.atomic
def liger_import(
    *,
    path: Path | str,
    release: str = "",
    progress: Callable[[int], None] | None = None,
    as_of: datetime | None = None,
) -> ImportSummary:
    """Import one Liger benchmark CSV: new rows become runs, replaced rows supersede their old
    run, rows no longer listed are marked withdrawn. All of it or none of it. `as_of` is when
    upstream published the file (default: when its newest row was measured, never the clock)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportRejected(f"{path}: cannot read the file ({exc.strerror})") from None
    return _liger_import_data(data=data, filename=path.name, release=release, as_of=as_of, progress=progress)


@transaction.atomic
def liger_version_import(
    *, data: bytes, filename: str, upstream: UpstreamVersion, progress: Callable[[int], None] | None = None
) -> ImportSummary:
    """One version of the data file from the repository's history, dated by its commit."""
    return _liger_import_data(
        data=data, filename=filename, upstream=upstream, as_of=upstream.date, progress=progress
    )


@collector_paused()
def _liger_import_data(
    *, data, filename, release="", as_of=None, upstream=None, progress=None
) -> ImportSummary:
    try:
        source = _source_get_or_create(liger.SOURCE)
        variant = liger.variant_of(filename)
        existing = _runs_existing(source)
        # A version of the repository's history is whole as git stored it (liger.parse_file).
        # A new run's manifest and digest are made as its row is written (_runs_sync).
        rows = liger.parse_file(
            data,
            variant=variant,
            known=existing.by_row_key,
            final_newline=upstream is None,
            manifests=False,
        )
        record = SourceImport.objects.create(
            source=source,
            filename=filename,
            file_digest=digests.file_digest(data),
            release=release,
            rows=len(rows),
            as_of=as_of or _newest_row(rows, existing),
            upstream_commit=upstream.commit if upstream else "",
            pull_request=upstream.pull_request if upstream else None,
            subject=upstream.subject[:500] if upstream else "",
        )
        summary = _runs_sync(
            source=source,
            rows=rows,
            record=record,
            existing=existing,
            variant=variant,
            progress=progress,
            stale=_import_is_stale(record, variant),
        )
    except liger.LigerFormatError as exc:
        raise ImportRejected(f"{filename}: {exc}") from None
    for name, value in summary.as_dict().items():
        setattr(record, name, value)
    record.kernels = sorted(
        BenchmarkRun.objects.filter(first_import=record)
        .order_by()
        .values_list("kernel__slug", flat=True)
        .distinct()
    )
    record.save()
    # New values make new steps; a run credited to an earlier commit moves its change's credit.
    changes_detect(runs=BenchmarkRun.objects.filter(Q(first_import=record) | Q(origin=record)))
    generation_bump()
    return summary


def _newest_row(rows, existing: "_Existing") -> datetime:
    """When a file given without a date was published: no earlier than its newest row was
    measured. Never the clock: a file imported by hand today is not newer than a release
    published after its rows (a newer release would then count as stale and withdraw its runs)."""
    return max(
        existing.by_external_id[row.external_id].observed_at
        if isinstance(row, liger.KnownRow)
        else row.run["observed_at"]
        for row in rows
    )


def _import_is_stale(record: SourceImport, variant: str) -> bool:
    """A file older than one of its suite already imported (a history imported after a
    release) adds the values it published, but does not say what is listed now."""
    newer = SourceImport.objects.filter(source=record.source, as_of__gt=record.as_of).exclude(pk=record.pk)
    names = newer.values_list("filename", flat=True).distinct()
    return any(liger.variant_of(name) == variant for name in names)


class _Known(NamedTuple):
    """What an import needs to know of a run already in the registry."""

    pk: int
    digest: str
    withdrawn: bool
    superseded_by_id: int | None
    upstream_key: str
    comparison_key: str
    implementation_id: int
    variant: str | None  # labels["variant"]: the suite (file) the run belongs to
    observed_at: datetime
    origin_id: int | None


@dataclass
class _Existing:
    by_external_id: dict[str, _Known]
    by_row_key: dict[tuple, str]
    import_dates: dict[int, tuple]  # the source's imports: {pk: (as_of, upstream_commit)}


def _runs_existing(source: Source) -> _Existing:
    """Every run of the source, in one query, by external id and by `liger.run_key`."""
    by_external_id, by_row_key = {}, {}
    columns = ("external_id", "unit", "median", "p20", "p80", "workload__x_label", "version")
    runs = BenchmarkRun.objects.filter(source=source).annotate(
        variant=KT("labels__variant"), version=KT("labels__liger_version")
    )
    for values in runs.values_list(*_Known._fields, *columns):
        known = _Known(*values[: len(_Known._fields)])
        external_id, unit, median, p20, p80, x_label, version = values[len(_Known._fields) :]
        by_external_id[external_id] = known
        key = liger.run_key(
            upstream_key=known.upstream_key,
            unit=unit,
            x_label=x_label,
            median=median,
            p20=p20,
            p80=p80,
            observed_at=known.observed_at,
            liger_version=version,
        )
        by_row_key[key] = external_id
    import_dates = {
        pk: (as_of, commit)
        for pk, as_of, commit in SourceImport.objects.filter(source=source).values_list(
            "pk", "as_of", "upstream_commit"
        )
    }
    return _Existing(by_external_id, by_row_key, import_dates)


def _runs_sync(*, source, rows, record, existing, variant, progress, stale=False) -> ImportSummary:
    """`stale`: a newer file of the suite is already imported, so this one only adds the values
    it published, each in its place in its key's history, and lists or withdraws nothing."""
    summary = ImportSummary(rows=len(rows))
    new_rows, restored, listed, origins = [], [], set(), []
    for done, row in enumerate(rows, start=1):
        if isinstance(row, liger.KnownRow):
            external_id = row.external_id
            known = existing.by_external_id[external_id]
        else:
            external_id = row.run["external_id"]
            known = existing.by_external_id.get(external_id)
        listed.add(external_id)
        if known is None:
            new_rows.append(row)
        elif isinstance(row, liger.LigerRow) and known.digest != _digest_of(row):
            raise liger.LigerFormatError(
                f"run {external_id} is already published with other values; "
                "a changed row needs a new timestamp",
                line=row.line,
            )
        else:
            summary.unchanged += 1
            if known.withdrawn and not stale:
                restored.append(known.pk)
            if _origin_improves(record, known.origin_id, existing.import_dates):
                origins.append(known.pk)
        if progress and done % 100 == 0:
            progress(100)
    if progress:
        progress(len(rows) % 100)
    new_runs = _runs_build(new_rows, source, record)
    if stale:
        superseded, withdrawn = _runs_place_stale(existing, new_runs), []
    else:
        superseded = _runs_supersede(existing, new_runs)
        withdrawn = _runs_to_withdraw(existing, listed, variant, superseded)
    superseded.update(_targets_supersede(existing, new_runs, restored, withdrawn, superseded))
    ranks = _ranks_after_import(existing, new_runs, restored, withdrawn, superseded)
    # The runs a new one replaces stop being current before it is written: one current run per
    # target (models.BenchmarkRun, one_current_run_per_target) holds after every statement. Their
    # pointer to a row not written yet is fine, as foreign keys are checked at commit.
    _superseded_by_write(superseded)
    _runs_insert(new_runs, complete=_manifests_maker(new_runs, new_rows))
    summary.created = len(new_runs)
    summary.restored = _update_in_batches(restored, withdrawn=False, withdrawn_at=None)
    summary.superseded = len(superseded) + sum(1 for run in new_runs if run.superseded_by_id)
    summary.withdrawn = _update_in_batches(withdrawn, withdrawn=True, withdrawn_at=timezone.now())
    summary.withdrawn += sum(1 for run in new_runs if run.withdrawn)
    _update_in_batches(origins, origin_id=record.pk)
    _ranks_write(ranks)
    return summary


def _digest_of(row: liger.LigerRow) -> str:
    row.manifest_make()
    return row.run["digest"]


def _manifests_maker(new_runs: list[_NewRun], new_rows: list) -> Callable[[_NewRun], str | None]:
    """What `_runs_insert` calls on each new run just before writing it: the run's manifest and
    digest, made from its row then rather than at the parse, so that this Python work runs while
    the database takes the rows before it (COPY streams them). Returns the manifest's JSON text."""
    rows = {run.pk: row for run, row in zip(new_runs, new_rows, strict=True)}

    def complete(run: _NewRun) -> str | None:
        row = rows[run.pk]
        row.manifest_make()
        run.manifest, run.digest = row.run["manifest"], row.run["digest"]
        return row.manifest_json

    return complete


def _origin_improves(record: SourceImport, origin_id: int | None, import_dates: dict) -> bool:
    """Whether `record` is an earlier known publication of a run than its current origin: a
    commit of the history beats a release, and an older commit a newer one."""
    if origin_id is None:
        return True
    if not record.upstream_commit:
        return False
    origin_date, origin_commit = import_dates[origin_id]
    return not origin_commit or record.as_of < origin_date


def _runs_place_stale(existing: "_Existing", new_runs: list) -> dict[int, int]:
    """The new runs of an older file, each placed in its key's history by the time it was
    measured: superseded by the next newer run of its key, or, where none is newer, the newest
    value of a key the newest file no longer lists (withdrawn). Existing runs whose successor
    changes are returned as {pk: new successor pk}. A run the newest file lists stays the newest
    of its key whatever its timestamp."""
    chains: dict[str, list] = {}
    for run in new_runs:
        chains.setdefault(run.upstream_key, []).append(run)
    for known in existing.by_external_id.values():
        if known.upstream_key in chains:
            chains[known.upstream_key].append(known)
    now = timezone.now()
    repointed = {}
    for members in chains.values():
        members.sort(key=lambda m: (_is_listed_now(m), m.observed_at, m.pk))
        for member, successor in zip(members, members[1:] + [None], strict=True):
            if isinstance(member, _Known):
                if successor is not None and member.superseded_by_id != successor.pk:
                    repointed[member.pk] = successor.pk
            elif successor is not None:
                member.superseded_by_id = successor.pk
            else:
                member.withdrawn, member.withdrawn_at = True, now
    return repointed


def _is_listed_now(member) -> bool:
    return isinstance(member, _Known) and not member.withdrawn and member.superseded_by_id is None


def _runs_supersede(existing: _Existing, new_runs: list[_NewRun]) -> dict[int, int]:
    """A row upstream replaced (same upstream key, new timestamp or version) supersedes the run
    it replaced; the old run stays, with everything attached to it. Sets `superseded_by_id` on
    the new runs that are not the newest of their key; returns {existing run pk: newest pk}."""
    newest = {}
    for run in sorted(new_runs, key=lambda r: r.observed_at):  # stable: later in the file wins a tie
        newest[run.upstream_key] = run
    for run in new_runs:
        if newest[run.upstream_key] is not run:
            run.superseded_by_id = newest[run.upstream_key].pk
    return {
        known.pk: newest[known.upstream_key].pk
        for known in existing.by_external_id.values()
        if known.superseded_by_id is None and known.upstream_key in newest
    }


def _targets_supersede(existing, new_runs, restored, withdrawn, superseded) -> dict[int, int]:
    """One current run per target (comparison key and implementation): two suites' files can
    list the same target under different upstream keys (all_benchmark_data.csv and
    all_benchmark_data_cutile.csv both measure torch's JSD on a B200), so the runs still current
    after the import's own supersession are grouped by target, and the latest measured of each
    supersedes the others. Sets `superseded_by_id` on the new runs it replaces; returns
    {existing run pk: successor pk} for the existing ones."""
    gone = set(withdrawn) | set(superseded)
    targets: dict[tuple, list] = {}
    for known in existing.by_external_id.values():
        current = known.superseded_by_id is None and (not known.withdrawn or known.pk in restored)
        if current and known.pk not in gone:
            targets.setdefault((known.comparison_key, known.implementation_id), []).append(known)
    for run in new_runs:
        if run.superseded_by_id is None and not run.withdrawn:
            targets.setdefault((run.comparison_key, run.implementation_id), []).append(run)
    replaced = {}
    for members in targets.values():
        members.sort(key=lambda m: (m.observed_at, m.pk))  # a tie goes to the newer row
        newest = members[-1]
        for member in members[:-1]:
            if isinstance(member, _Known):
                replaced[member.pk] = newest.pk
            else:
                member.superseded_by_id = newest.pk
    return replaced


def _runs_to_withdraw(existing: _Existing, listed: set, variant: str, superseded: dict) -> list[int]:
    """Rows the source no longer lists are marked withdrawn, never deleted; a run already
    replaced by a newer row counts as superseded, not withdrawn. A file speaks for the runs of
    its own suite (variant) only: all_benchmark_data.csv does not withdraw the runs of
    all_benchmark_data_cutile.csv, nor the other way round."""
    return [
        known.pk
        for external_id, known in existing.by_external_id.items()
        if external_id not in listed
        and not known.withdrawn
        and known.superseded_by_id is None
        and known.pk not in superseded
        and known.variant == (variant or None)
    ]


def _ranks_after_import(existing, new_runs, restored, withdrawn, superseded) -> dict[int, tuple]:
    """Decide the ranks of every comparison group the import touches, before writing: the new
    runs get theirs on the run itself; returns the existing runs' changes {pk: (rank, size)}."""
    by_pk = {known.pk: known for known in existing.by_external_id.values()}
    changed = set(restored) | set(withdrawn) | set(superseded)
    keys = {run.comparison_key for run in new_runs} | {by_pk[pk].comparison_key for pk in changed}
    members = []
    for pk, key, median, withdrawn_now, superseded_by, rank, size in _group_members(keys):
        if pk in changed:
            withdrawn_now = (withdrawn_now or pk in withdrawn) and pk not in restored
            superseded_by = superseded.get(pk, superseded_by)
        members.append((pk, key, median, not withdrawn_now and superseded_by is None, rank, size))
    for run in new_runs:
        current = run.superseded_by_id is None and not run.withdrawn
        members.append((run, run.comparison_key, run.median, current, None, None))
    updates = {}
    for member, (rank, size) in _ranks_decide(members).items():
        if isinstance(member, _NewRun):
            member.rank, member.group_size = rank, size
        else:
            updates[member] = (rank, size)
    return updates


# The history of the data file: every value the source ever published.


class VersionRefused(ImportRejected):
    """One version could not be imported: it names the version, its commit and pull request, what
    the versions before it became, and whether running again can help."""

    def __init__(self, *, version: history.Version, number: int, count: int, detail: str, unreadable: bool):
        where = f"version {number} of {count} (commit {version.commit[:8]}"
        where += f", #{version.pull_request})" if version.pull_request else ")"
        before = (
            "nothing was imported"
            if number == 1
            else f"{number - 1} version{' before it is' if number == 2 else 's before it are'} imported"
        )
        advice = (
            "fetch the missing objects (git fetch, or a clone without --filter), then run again to resume"
            if unreadable
            else "a rerun stops at this version again until its file is mended"
        )
        super().__init__(f"{where}: {detail} ({before}; {advice})")


def liger_history_import(*, path: Path | str, progress=None) -> VersionsSummary:
    """Every version of the data file, oldest first, each in its own transaction (all of a
    version or none of it). A version whose commit is already imported is skipped, so a second
    run changes nothing and an interrupted one resumes. The summary's superseded and withdrawn
    counts are the runs that end so, counted after the last version (a version older than a
    release already imported re-points runs that were superseded already)."""
    versions = history.versions(path)
    done = set(
        SourceImport.objects.filter(
            source__slug=SOURCE["slug"], upstream_commit__in=[v.commit for v in versions]
        ).values_list("upstream_commit", flat=True)
    )
    before = _ended(), _withdrawn()
    summary = VersionsSummary(versions=len(versions))
    for number, version in enumerate(versions, start=1):
        if version.commit in done:
            summary.already += 1
            continue
        imported = _version_import(version, number, len(versions), progress)
        summary.imported += 1
        for name, value in imported.as_dict().items():
            setattr(summary.totals, name, getattr(summary.totals, name) + value)
    summary.totals.superseded = _ended() - before[0]
    summary.totals.withdrawn = _withdrawn() - before[1]
    return summary


def _ended() -> int:
    return BenchmarkRun.objects.filter(source__slug=SOURCE["slug"], superseded_by__isnull=False).count()


def _withdrawn() -> int:
    return BenchmarkRun.objects.filter(source__slug=SOURCE["slug"], withdrawn=True).count()


def _version_import(version: history.Version, number: int, count: int, progress) -> ImportSummary:
    upstream = UpstreamVersion(
        commit=version.commit, date=version.date, pull_request=version.pull_request, subject=version.subject
    )
    refused = {"version": version, "number": number, "count": count}
    try:
        data = version.data
    except history.HistoryError as exc:
        raise VersionRefused(**refused, detail=str(exc), unreadable=True) from None
    try:
        return liger_version_import(data=data, filename=MAIN_FILE, upstream=upstream, progress=progress)
    except ImportRejected as exc:
        raise VersionRefused(**refused, detail=str(exc), unreadable=False) from None


def history_last_date(path: Path | str = BUNDLED_LIGER_HISTORY):
    """The date of the newest version: the bundled file is that version."""
    return history.versions(path)[-1].date


def newest_data_load() -> ImportSummary:
    """The newest shipped CSV alone: the rerun jobs' targets, quicker than the whole history
    (the sweep loads it into an empty registry, SourcePlugin.rerun_targets_loader)."""
    return liger_import(path=BUNDLED_LIGER_CSV)


def bundled_data_load(*, progress=None) -> dict[str, ImportSummary]:
    """Everything the project ships: the Liger data and its history (the controlled runs are
    loaded by load_bundled_data after it)."""
    # The history first: the bundled file is its last version (the same bytes), dated as that commit.
    return {
        "liger-kernel-history": liger_history_import(path=BUNDLED_LIGER_HISTORY, progress=progress),
        "liger-kernel": liger_import(
            path=BUNDLED_LIGER_CSV, progress=progress, as_of=history_last_date(BUNDLED_LIGER_HISTORY)
        ),
    }
