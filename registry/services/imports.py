"""The run writer every source's import services share, and comparison-group ranks.

A source's services (registry/sources/<name>/services.py) decide which of its rows are new runs
and which runs they supersede or withdraw; the writer here makes the records (content-addressed by
digest), takes the runs' primary keys, writes them in one statement per batch and ranks each
comparison group, the one way for every source.
"""

import gc
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from operator import attrgetter

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import JSONField
from django.utils import timezone

from registry import digests
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
from registry.services.run_keys import run_keys_of
from registry.speed_of_light import measured_ceilings, sol_fields, work_of

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


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector held off while an import parses and writes its rows.
    The rows hold no reference cycles (reference counting frees them as before), but the
    thousands of dicts they allocate set off collections, and a collection of the oldest
    generation walks every object of the process, all of Django included: one such collection
    took a sixth of a first import of the bundled CSV (docs/performance.md, section 7). It runs
    again, if it ran before, when the import ends, however it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    _objects_insert(model, missing)
    found.update({obj.digest: obj for obj in missing})
    return found


def _objects_insert(model, objects: list) -> None:
    """Write new rows of `model` and set their primary keys. On PostgreSQL, keys from the
    table's sequence and one COPY: bulk_create there sends each column as an array
    (`UNNEST`), and psycopg escapes every quote of a JSON document in an array's text with a
    regular expression, which cost more than the rest of the import's specs (the workloads' three
    documents each). Elsewhere bulk_create, which sets the keys too (RETURNING)."""
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects, batch_size=BATCH_SIZE)
        return
    for obj, pk in zip(objects, _pks_take(model, len(objects)), strict=True):
        obj.pk = pk
    fields = model._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy:
            for obj in objects:
                copy.write_row([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])
    for obj in objects:
        obj._state.adding, obj._state.db = False, connection.alias


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
    pks = _pks_take(BenchmarkRun, len(rows))
    defaults = _NewRun.defaults()
    speed_of_light = _SpeedOfLight()
    runs = []
    # Primary keys by spec digest and kernel slug, read once (a model's pk is a property).
    ids = {attribute: {digest: obj.pk for digest, obj in found.items()} for attribute, found in specs.items()}
    kernel_ids = {slug: kernel.pk for slug, kernel in kernels.items()}
    source_id, record_id = source.pk, record.pk
    for pk, row in zip(pks, rows, strict=True):
        workload = specs["workload"][row.workload["digest"]]
        environment = specs["environment"][row.environment["digest"]]
        implementation = specs["implementation"][row.implementation["digest"]]
        kernel = row.kernel["slug"]
        workload_id = ids["workload"][row.workload["digest"]]
        columns = {
            **defaults,
            "id": pk,
            "source_id": source_id,
            "first_import_id": record_id,
            "origin_id": record_id,
            "kernel_id": kernel_ids[kernel],
            "implementation_id": ids["implementation"][row.implementation["digest"]],
            "workload_id": workload_id,
            "protocol_id": ids["protocol"][row.protocol["digest"]],
            "environment_id": ids["environment"][row.environment["digest"]],
            **row.run,
            # Written by the COPY, not by run_keys_fill's UPDATE of every new row after it.
            **run_keys_of(environment=environment, implementation=implementation, workload=workload),
        }
        runs.append(_NewRun(columns, speed_of_light=(speed_of_light, kernel, workload, environment.slug)))
    return runs


class _SpeedOfLight:
    """The speed of light of the runs one import writes, each computed as its row is written and
    written with it (COPY), not updated after it: COPY streams the rows, so this Python work runs
    while the database takes the rows before it. The measured ceilings are read before the COPY
    holds the connection, and a workload's counted work once per kernel, workload and pass."""

    def __init__(self):
        self.measured = measured_ceilings()
        self.works = {}

    def fields(self, run: "_NewRun", kernel: str, workload: Workload, gpu_slug: str) -> dict:
        mode = run.operation_mode
        key = (kernel, run.workload_id, mode)
        if key not in self.works:
            self.works[key] = work_of(kernel=kernel, workload=workload, operation_mode=mode)
        return sol_fields(
            kernel=kernel,
            workload=workload,
            operation_mode=mode,
            metric=run.metric,
            median=run.median,
            gpu_slug=gpu_slug,
            measured=self.measured,
            work=self.works[key],
        )


class _NewRun:
    """A run about to be written: its columns by attribute name. A BenchmarkRun instance cost
    more to construct than the row costs to parse, and nothing here needs one."""

    def __init__(self, columns: dict, speed_of_light: tuple | None = None):
        self.__dict__.update(columns)
        self._speed_of_light = speed_of_light  # (_SpeedOfLight, its arguments) until computed

    def speed_of_light_add(self) -> None:
        """Its speed-of-light columns (SOL_FIELDS), where they are still to be computed: the
        writer calls this as it writes the row (_SpeedOfLight)."""
        if self._speed_of_light is not None:
            computed, *arguments = self._speed_of_light
            self._speed_of_light = None
            self.__dict__.update(computed.fields(self, *arguments))

    @property
    def pk(self) -> int:
        return self.id

    @staticmethod
    def defaults() -> dict:
        return {f.attname: f.get_default() for f in BenchmarkRun._meta.concrete_fields}


def _pks_take(model, count: int) -> list[int]:
    """Primary keys for `count` new rows of `model`. PostgreSQL hands them out from the table's
    sequence. SQLite has one writer at a time and this transaction has already written (the
    import record), so the keys after the highest one ever used are ours until it commits."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, count]
            )
            return [pk for (pk,) in cursor.fetchall()]
        cursor.execute(f"SELECT max(id) FROM {connection.ops.quote_name(table)}")
        highest = cursor.fetchone()[0] or 0
        if connection.vendor == "sqlite":
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            found = cursor.fetchone()
            highest = max(highest, found[0] if found else 0)
    return list(range(highest + 1, highest + 1 + count))


def _whole_when_built(run: "_NewRun") -> None:
    """The runs of a source that makes each manifest as it builds the row: nothing to add."""
    return None


def _runs_insert(runs: list[_NewRun], complete: Callable[[_NewRun], str | None] = _whole_when_built) -> None:
    """Write the new runs, each column prepared as bulk_create prepares it: with COPY on
    PostgreSQL, one executemany elsewhere. Django's INSERT compilation cost more than the
    database's work here (docs/performance.md). `complete` is called on each run
    just before its row is taken, to set what only the written row needs (a source's manifest
    and digest): COPY streams the rows, so that work runs while the database takes the rows
    before it. It returns the manifest's JSON text where the source already has it (its
    canonical form, which is json.dumps's text with sorted keys), which is then not serialised
    again, or None. Each run's speed of light is computed there too (_SpeedOfLight)."""
    if not runs:
        return
    database = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: it costs a lookup per call
    fields, values = _column_values(database)
    table = BenchmarkRun._meta.db_table
    columns = ", ".join(database.ops.quote_name(f.column) for f in fields)
    with database.cursor() as cursor:
        if database.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for run in runs:
                    run.speed_of_light_add()
                    copy.write_row(values(run, complete(run)))
            return
        placeholders = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"
        for start in range(0, len(runs), BATCH_SIZE):
            batch = runs[start : start + BATCH_SIZE]
            for run in batch:
                run.speed_of_light_add()
            cursor.executemany(sql, [values(run, complete(run)) for run in batch])


def _column_values(database) -> tuple[list, Callable[[_NewRun, str | None], list]]:
    """The run's columns in the order the writer sends them (JSON documents last, the manifest
    first of them), and a function giving a run's values in that order, each as get_db_prep_save
    prepares it; what a column needs is decided once, not per value. A str, int, float, bool or
    None is what get_db_prep_save returns for it outside a JSON column; anything else (datetimes,
    enums) goes through its field. The auto_now columns get the one timestamp of the write."""
    fields = BenchmarkRun._meta.concrete_fields
    scalars = [f for f in fields if not isinstance(f, JSONField)]
    documents = sorted((f for f in fields if isinstance(f, JSONField)), key=lambda f: f.attname != "manifest")
    scalars_of, documents_of = (attrgetter(*(f.attname for f in group)) for group in (scalars, documents))
    now = timezone.now()
    stamps = {
        i: f.get_db_prep_save(now, database)
        for i, f in enumerate(scalars)
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    }
    # A stamped column's value is the stamp, put in below whatever the run holds: nothing to prepare.
    saves = [_stamped if i in stamps else f.get_db_prep_save for i, f in enumerate(scalars)]
    texts = [_json_text(f, database) for f in documents]
    plain = {str, int, float, bool, type(None)}

    def values(run, manifest_text):
        row = [
            v if type(v) in plain else save(v, database)
            for v, save in zip(scalars_of(run), saves, strict=True)
        ]
        for i, stamp in stamps.items():
            row[i] = stamp
        for position, (document, text) in enumerate(zip(documents_of(run), texts, strict=True)):
            if position == 0 and manifest_text is not None:
                row.append(manifest_text)
            else:
                row.append(None if document is None else text(document))
        return row

    return [*scalars, *documents], values


def _stamped(value, connection) -> None:
    """An auto_now column's preparation: none, as `values` puts the write's one stamp there."""
    return None


def _json_text(field: JSONField, database) -> Callable:
    """What a JSON column sends for a document: json.dumps's text on PostgreSQL (Django's adapter
    is psycopg's Jsonb with json.dumps, which COPY's text format writes as that text), or the
    field's own preparation where it has an encoder or the database is not PostgreSQL."""
    if database.vendor == "postgresql" and field.encoder is None:
        return _json_dumps
    return partial(field.get_db_prep_save, connection=database)


# json.dumps's default text, its encoder built once rather than for every document.
_json_dumps = digests.json_encoder(
    ensure_ascii=True, separators=(", ", ": "), sort_keys=False, allow_nan=True
)


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
