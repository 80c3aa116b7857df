"""The run writer every source's import services share, and comparison-group ranks.

A source's services (registry/sources/<name>/services.py) decide which of its rows are new runs
and which runs they supersede or withdraw; the writer here makes the records (content-addressed by
digest), takes the runs' primary keys, writes them in one statement per batch and ranks each
comparison group, the one way for every source.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import JSONField
from django.utils import timezone

from registry.competition_ranks import competition_ranks
from registry.models import (
    BenchmarkRun,
    Environment,
    Implementation,
    Kernel,
    Protocol,
    Source,
    Workload,
)
from registry.speed_of_light import measured_ceilings, sol_fields

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


def _source_get_or_create(spec: dict) -> Source:
    source, _ = Source.objects.get_or_create(
        slug=spec["slug"], defaults={k: v for k, v in spec.items() if k != "slug"}
    )
    return source


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
