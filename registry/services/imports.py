"""Importing source data: runs created, kept, superseded or withdrawn, and group ranks."""

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import JSONField, Q
from django.db.models.fields.json import KT
from django.utils import timezone

from registry import digests
from registry.cache import generation_bump
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
from registry.ranks import competition_ranks
from registry.services.changes import changes_detect
from registry.services.run_keys import run_keys_fill
from registry.sources import liger as liger_paths
from registry.sources.liger import importer as liger
from registry.speed_of_light import measured_ceilings, sol_fields

BUNDLED_LIGER_CSV = liger_paths.BUNDLED_CSV
BATCH_SIZE = 1000


@dataclass
class ImportSummary:
    rows: int = 0
    created: int = 0
    unchanged: int = 0
    superseded: int = 0
    withdrawn: int = 0
    restored: int = 0
    extended: int = 0  # runs already there given jobs they lacked (controlled runs' later reruns)

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.rows} rows: {self.created} created, {self.unchanged} unchanged, "
            f"{self.superseded} superseded, {self.withdrawn} withdrawn"
            + (f", {self.restored} listed again" if self.restored else "")
            + (f", {self.extended} given new jobs" if self.extended else "")
        )


@dataclass
class VersionsSummary:
    """What importing a source's history did: how many versions, how many of them were imported
    now or before, and the runs they wrote, added up."""

    versions: int = 0
    imported: int = 0
    already: int = 0
    totals: ImportSummary = field(default_factory=ImportSummary)

    def __str__(self) -> str:
        t = self.totals
        return (
            f"{self.versions} versions ({self.imported} imported, {self.already} already imported): "
            f"{t.rows} rows, {t.created} runs created, {t.unchanged} unchanged, {t.superseded} superseded, "
            f"{t.withdrawn} withdrawn" + (f", {t.restored} listed again" if t.restored else "")
        )

    @property
    def created(self) -> int:
        return self.totals.created


class ImportRejected(Exception):
    """The file cannot be imported; nothing was written."""


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


def _liger_import_data(
    *, data, filename, release="", as_of=None, upstream=None, progress=None
) -> ImportSummary:
    try:
        source = _source_get_or_create(liger.SOURCE)
        variant = liger.variant_of(filename)
        existing = _runs_existing(source)
        # A version of the repository's history is whole as git stored it (liger.parse_file).
        rows = liger.parse_file(
            data, variant=variant, known=existing.by_row_key, final_newline=upstream is None
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
        set(BenchmarkRun.objects.filter(first_import=record).values_list("kernel__slug", flat=True))
    )
    record.save()
    run_keys_fill(runs=BenchmarkRun.objects.filter(first_import=record))
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


def _source_get_or_create(spec: dict) -> Source:
    source, _ = Source.objects.get_or_create(
        slug=spec["slug"], defaults={k: v for k, v in spec.items() if k != "slug"}
    )
    return source


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
        elif isinstance(row, liger.LigerRow) and known.digest != row.run["digest"]:
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
    _runs_insert(new_runs, [row.manifest_json for row in new_rows])
    summary.created = len(new_runs)
    summary.restored = _update_in_batches(restored, withdrawn=False, withdrawn_at=None)
    summary.superseded = len(superseded) + sum(1 for run in new_runs if run.superseded_by_id)
    summary.withdrawn = _update_in_batches(withdrawn, withdrawn=True, withdrawn_at=timezone.now())
    summary.withdrawn += sum(1 for run in new_runs if run.withdrawn)
    _update_in_batches(origins, origin_id=record.pk)
    _ranks_write(ranks)
    return summary


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


def _kernels_ensure(rows) -> dict[str, Kernel]:
    wanted = {row.kernel["slug"]: row.kernel for row in rows}
    if not wanted:
        return {}
    kernels = {k.slug: k for k in Kernel.objects.filter(slug__in=wanted)}
    missing = [Kernel(**spec) for slug, spec in wanted.items() if slug not in kernels]
    if missing:
        Kernel.objects.bulk_create(missing, batch_size=BATCH_SIZE)
        kernels.update({k.slug: k for k in Kernel.objects.filter(slug__in=[k.slug for k in missing])})
    return kernels


def _specs_ensure(model, rows, attribute, kernels) -> dict[str, object]:
    """Content-addressed rows: find each spec by digest, create the ones not seen before."""
    wanted = {}
    for row in rows:
        spec = getattr(row, attribute)
        wanted.setdefault(spec["digest"], (spec, row.kernel["slug"]))
    if not wanted:
        return {}
    found = {}
    digests_wanted = list(wanted)
    for start in range(0, len(digests_wanted), BATCH_SIZE):
        chunk = digests_wanted[start : start + BATCH_SIZE]
        found.update({obj.digest: obj for obj in model.objects.filter(digest__in=chunk)})
    with_kernel = model in (Implementation, Workload)
    missing = [
        model(**spec, **({"kernel": kernels[kernel]} if with_kernel else {}))
        for digest, (spec, kernel) in wanted.items()
        if digest not in found
    ]
    # bulk_create sets primary keys on PostgreSQL and on SQLite (RETURNING) alike.
    model.objects.bulk_create(missing, batch_size=BATCH_SIZE)
    found.update({obj.digest: obj for obj in missing})
    return found


def _runs_build(rows, source, record) -> list["_NewRun"]:
    """The new runs, unsaved, with their primary keys already taken, so that supersession and
    ranks are decided before a single row is written, and written with it."""
    if not rows:
        return []
    kernels = _kernels_ensure(rows)
    specs = {
        attribute: _specs_ensure(model, rows, attribute, kernels)
        for model, attribute in (
            (Implementation, "implementation"),
            (Workload, "workload"),
            (Protocol, "protocol"),
            (Environment, "environment"),
        )
    }
    pks = _run_pks_take(len(rows))
    defaults = _NewRun.defaults()
    measured = measured_ceilings()
    runs = []
    for pk, row in zip(pks, rows, strict=True):
        workload = specs["workload"][row.workload["digest"]]
        environment = specs["environment"][row.environment["digest"]]
        # The speed of light is written with the row (COPY), not updated after it.
        sol = sol_fields(
            kernel=row.kernel["slug"],
            workload=workload,
            operation_mode=row.run["operation_mode"],
            metric=row.run["metric"],
            median=row.run["median"],
            gpu_slug=environment.slug,
            measured=measured,
        )
        runs.append(
            _NewRun(
                {
                    **defaults,
                    "id": pk,
                    "source_id": source.pk,
                    "first_import_id": record.pk,
                    "origin_id": record.pk,
                    "kernel_id": kernels[row.kernel["slug"]].pk,
                    "implementation_id": specs["implementation"][row.implementation["digest"]].pk,
                    "workload_id": workload.pk,
                    "protocol_id": specs["protocol"][row.protocol["digest"]].pk,
                    "environment_id": environment.pk,
                    **row.run,
                    **sol,
                }
            )
        )
    return runs


class _NewRun:
    """A run about to be written: its columns by attribute name. A BenchmarkRun instance cost
    more to construct than the row costs to parse, and nothing here needs one."""

    def __init__(self, columns: dict):
        self.__dict__.update(columns)

    @property
    def pk(self) -> int:
        return self.id

    @staticmethod
    def defaults() -> dict:
        return {f.attname: f.get_default() for f in BenchmarkRun._meta.concrete_fields}


def _run_pks_take(count: int) -> list[int]:
    """Primary keys for `count` new runs. PostgreSQL hands them out from the table's sequence.
    SQLite has one writer at a time and this transaction has already written (the import
    record), so the keys after the highest one ever used are ours until it commits."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence('registry_benchmarkrun', 'id')) "
                "FROM generate_series(1, %s)",
                [count],
            )
            return [pk for (pk,) in cursor.fetchall()]
        cursor.execute("SELECT max(id) FROM registry_benchmarkrun")
        highest = cursor.fetchone()[0] or 0
        if connection.vendor == "sqlite":
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = 'registry_benchmarkrun'")
            found = cursor.fetchone()
            highest = max(highest, found[0] if found else 0)
    return list(range(highest + 1, highest + 1 + count))


def _runs_insert(runs: list[_NewRun], manifest_json: list[str | None]) -> None:
    """Write the new runs, each column prepared as bulk_create prepares it: with COPY on
    PostgreSQL, one executemany elsewhere. Django's INSERT compilation cost more than the
    database's work here (docs/performance.md). A manifest whose JSON text the parser already
    has (its canonical form, which is json.dumps's text with sorted keys) is not serialised again."""
    if not runs:
        return
    fields = BenchmarkRun._meta.concrete_fields
    now = timezone.now()
    stamped = {
        f.attname for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    }
    # A str, int, float, bool or None is what get_db_prep_save returns for it, except in a
    # JSON column; everything else (JSON, datetimes) is prepared by its field.
    prepare = [
        (f.attname, f.get_db_prep_save, isinstance(f, JSONField), f.attname in stamped) for f in fields
    ]
    database = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: it costs a lookup per call
    plain = (str, int, float, bool, type(None))
    manifest = next(i for i, f in enumerate(fields) if f.attname == "manifest")
    if database.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        def stored(text):
            return Jsonb(text, dumps=str)  # the text is JSON already
    else:

        def stored(text):
            return text

    def value(run, name, save, is_json, is_stamp):
        value = now if is_stamp else getattr(run, name)
        return value if type(value) in plain and not is_json else save(value, database)

    def values(run, text):
        return [
            stored(text) if i == manifest and text is not None else value(run, *field)
            for i, field in enumerate(prepare)
        ]

    table = BenchmarkRun._meta.db_table
    columns = ", ".join(database.ops.quote_name(f.column) for f in fields)
    with database.cursor() as cursor:
        if database.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for run, text in zip(runs, manifest_json, strict=True):
                    copy.write_row(values(run, text))
            return
        placeholders = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"
        for start in range(0, len(runs), BATCH_SIZE):
            batch = zip(
                runs[start : start + BATCH_SIZE], manifest_json[start : start + BATCH_SIZE], strict=True
            )
            cursor.executemany(sql, [values(run, text) for run, text in batch])


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


def _update_in_batches(pks: list[int], **values) -> int:
    return sum(
        BenchmarkRun.objects.filter(pk__in=pks[start : start + BATCH_SIZE]).update(**values)
        for start in range(0, len(pks), BATCH_SIZE)
    )


def _superseded_by_write(superseded: dict[int, int]) -> None:
    """One UPDATE … FROM (VALUES …) per batch (PostgreSQL, SQLite 3.33+): Django's bulk_update
    builds a CASE of thousands of branches, slower than everything else an import does."""
    items = list(superseded.items())
    table = connection.ops.quote_name(BenchmarkRun._meta.db_table)
    for start in range(0, len(items), BATCH_SIZE):
        chunk = items[start : start + BATCH_SIZE]
        rows = ", ".join(["(CAST(%s AS bigint), CAST(%s AS bigint))"] * len(chunk))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET superseded_by_id = v.column2 FROM (VALUES {rows}) AS v "
                f"WHERE {table}.id = v.column1",
                [value for pair in chunk for value in pair],
            )


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


def _group_members(keys) -> list[tuple]:
    keys = list(keys)
    found = []
    for start in range(0, len(keys), BATCH_SIZE):
        found += BenchmarkRun.objects.filter(comparison_key__in=keys[start : start + BATCH_SIZE]).values_list(
            "pk", "comparison_key", "median", "withdrawn", "superseded_by", "rank", "group_size"
        )
    return found


def _ranks_decide(members) -> dict:
    """{member: (rank, size)} for every member whose stored rank is not what it should be:
    1 = lowest median in its comparison group, ties share a rank; runs that are not current
    keep no rank. `members` are (member, comparison key, median, current, rank, size)."""
    groups: dict[str, list] = {}
    updates = {}
    for member, key, median, current, rank, size in members:
        if current:
            groups.setdefault(key, []).append((member, median, rank, size))
        elif rank is not None or size is not None:
            updates[member] = (None, None)
    for group in groups.values():
        ranks = competition_ranks([median for _, median, _, _ in group])
        for (member, _, old_rank, old_size), rank in zip(group, ranks, strict=True):
            if (old_rank, old_size) != (rank, len(group)):
                updates[member] = (rank, len(group))
    return updates


def _ranks_write(updates: dict[int, tuple]) -> None:
    """Ranks and group sizes take few distinct values: one UPDATE per (rank, size) pair."""
    by_value: dict[tuple, list] = {}
    for pk, value in updates.items():
        by_value.setdefault(value, []).append(pk)
    for (rank, size), pks in by_value.items():
        _update_in_batches(pks, rank=rank, group_size=size)


def groups_rerank(*, keys: Iterable[str] | None = None, source: Source | None = None) -> None:
    """Store each run's rank in its comparison group (1 = lowest median; ties share a rank).
    Only current runs are ranked; withdrawn and superseded runs keep no rank."""
    runs = BenchmarkRun.objects.all()
    if keys is not None:
        keys = list(keys)
        if not keys:
            return
        members = _group_members(keys)
    else:
        if source is not None:
            runs = runs.filter(
                comparison_key__in=BenchmarkRun.objects.filter(source=source).values("comparison_key")
            )
        members = runs.values_list(
            "pk", "comparison_key", "median", "withdrawn", "superseded_by", "rank", "group_size"
        )
    _ranks_write(
        _ranks_decide(
            (pk, key, median, not withdrawn and superseded is None, rank, size)
            for pk, key, median, withdrawn, superseded, rank, size in members
        )
    )
