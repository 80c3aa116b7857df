"""A synthetic registry: valid Liger rows across kernels, workloads, GPUs and versions.

`synthetic_rows(n)` derives rows from the bundled CSV: every distinct benchmark (kernel, provider,
pass, metric, sweep point, config) is repeated on more GPUs, at more sweep points (the swept value
plus k, k >= 1, so no synthetic workload equals a bundled one) and under several Liger releases
(a later release is a newer row with the same upstream key, so it supersedes the earlier one, as a
real upstream update does). Values are the bundled ones scaled by a deterministic factor.

Two ways into the database, producing the same rows (tests/perf/test_synthetic_registry.py checks
it against the importer):
- `write_csv(path, n)` then the real importer (`registry.sources.liger.services.liger_import`);
- `registry_grow(n)`: the importer's own parser (`liger.parse_file`) and spec/digest code on
  chunks of the same rows, the importer's own helpers for the specs, ranks and supersession
  computed as the importer computes them, and the runs written with PostgreSQL `COPY` (or
  `bulk_create` elsewhere). The 1,000,000-run registry is built this way.
"""

import csv
import hashlib
import io
import itertools
import json
import multiprocessing
import os
import pickle
import tempfile
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from registry import digests
from registry.competition_ranks import competition_ranks
from registry.sources.liger import importer as liger
from registry.sources.liger.services import BUNDLED_LIGER_CSV

VERSIONS = ["0.5.0", "0.6.0", "0.7.0", "0.8.0"]
# The catalog's GPUs first, then others the importer knows only by name (a valid environment spec
# with the vendor taken from the name, as for any GPU the catalog lacks).
GPUS = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA H200",
    "NVIDIA B200",
    "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA A10G",
    "NVIDIA L4",
    "NVIDIA L40S",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA GH200 480GB",
    "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA V100-SXM2-32GB",
    "AMD Instinct MI300X",
    "AMD Instinct MI250X",
    "AMD Instinct MI325X",
    "Intel Data Center GPU Max 1550",
    "NVIDIA B100",
    "NVIDIA T4",
]
CHUNK = 2000


def _bases() -> list[dict]:
    """The bundled rows, one per benchmark whatever GPU it ran on."""
    with BUNDLED_LIGER_CSV.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        bases, seen = [], set()
        for row in reader:
            key = tuple(row[c] for c in liger.COLUMNS if c not in ("gpu_name", "timestamp", "liger_version"))
            key = key[:7] + (row["extra_benchmark_config_str"],)
            if key not in seen:
                seen.add(key)
                bases.append(row)
    return header, bases


def _shift_x(value: str, k: int) -> str:
    try:
        number = float(value)
    except ValueError:
        return f"{value}-variant{k}"
    return str(int(number) + k) if number.is_integer() else repr(number + k)


def _factor(index: int) -> float:
    digest = hashlib.blake2b(index.to_bytes(8, "little"), digest_size=4).digest()
    return 0.85 + int.from_bytes(digest, "little") / 2**32 * 0.3


def _identity(base: dict, x_value: str, gpu: str, timestamp: str) -> int:
    """What makes a run's external id: its numeric parameters and dtype, pass, provider, GPU and
    time. Two shifted rows that would share one are not both produced."""
    config = json.loads(base["extra_benchmark_config_str"] or "{}")
    numeric = {k: v for k, v in config.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    numeric[base["x_name"]] = x_value
    fixed = (base["kernel_name"], base["kernel_operation_mode"], base["metric_name"], base["kernel_provider"])
    return hash((fixed, gpu, timestamp, str(config.get("dtype")), tuple(sorted(numeric.items()))))


def synthetic_rows(n: int):
    """Exactly n synthetic CSV rows (dicts keyed by the CSV header), always the same ones."""
    _, bases = _bases()
    produced, seen = 0, set()
    for k in itertools.count(1):
        for gpu in GPUS:
            for v, version in enumerate(VERSIONS):
                for base in bases:
                    if produced == n:
                        return
                    factor = _factor(produced)
                    ts = datetime.strptime(base["timestamp"], "%Y-%m-%d %H:%M:%S")
                    ts += timedelta(days=90 * (v + 1), seconds=k)
                    x_value, timestamp = _shift_x(base["x_value"], k), ts.strftime("%Y-%m-%d %H:%M:%S")
                    identity = _identity(base, x_value, gpu, timestamp)
                    if identity in seen:
                        continue
                    seen.add(identity)
                    row = dict(base)
                    row.update(
                        x_value=x_value,
                        gpu_name=gpu,
                        timestamp=timestamp,
                        liger_version=version,
                        y_value_50=repr(float(base["y_value_50"]) * factor),
                        y_value_20=repr(float(base["y_value_20"]) * factor),
                        y_value_80=repr(float(base["y_value_80"]) * factor),
                    )
                    produced += 1
                    yield row


def _csv_text(header: list[str], rows) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def write_csv(path: Path | str, n: int) -> Path:
    header, _ = _bases()
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(synthetic_rows(n))
    return path


# --- the fast path -------------------------------------------------------------------------------


def _parse_share(args) -> tuple[str, list, dict]:
    """Parse every `workers`-th chunk of the rows with the importer's own parser; keep the small
    facts (for ranks and supersession) in memory and the run rows in a temporary file."""
    n, worker, workers, folder = args
    header, _ = _bases()
    small, specs = [], {}
    out_path = Path(folder) / f"runs-{worker}.pickle"
    rows = synthetic_rows(n)
    with out_path.open("wb") as out:
        for number, chunk in enumerate(iter(lambda: list(itertools.islice(rows, CHUNK)), [])):
            if number % workers != worker:
                continue
            parsed = liger.parse_file(_csv_text(header, chunk))
            for offset, row in enumerate(parsed):
                index = number * CHUNK + offset
                run = row.run
                small.append(
                    (index, run["upstream_key"], run["observed_at"], run["comparison_key"], run["median"])
                )
                for attribute in ("kernel", "implementation", "workload", "protocol", "environment"):
                    spec = getattr(row, attribute)
                    specs.setdefault((attribute, spec.get("digest") or spec["slug"]), row)
                pickle.dump((index, _refs(row), run), out, protocol=pickle.HIGHEST_PROTOCOL)
    return str(out_path), small, specs


def _refs(row) -> dict:
    return {
        "kernel": row.kernel["slug"],
        "implementation": row.implementation["digest"],
        "workload": row.workload["digest"],
        "protocol": row.protocol["digest"],
        "environment": row.environment["digest"],
    }


def _supersede_and_rank(small: list, first_pk: int) -> dict[int, tuple]:
    """As `_runs_supersede` and `groups_rerank` decide: per upstream key the newest row (by
    observed time, later in the file on a tie) supersedes the others; the current runs of each
    comparison group are ranked by median, ties sharing a rank."""
    newest: dict[str, tuple] = {}
    for index, upstream_key, _observed_at, _, _ in sorted(small, key=lambda s: (s[2], s[0])):
        newest[upstream_key] = index
    groups = defaultdict(list)
    decided = {}
    for index, upstream_key, _, comparison_key, median in small:
        winner = newest[upstream_key]
        if winner == index:
            groups[comparison_key].append((index, median))
        else:
            decided[index] = (None, None, first_pk + winner)
    for members in groups.values():
        ranks = competition_ranks([m for _, m in members])
        for (index, _), rank in zip(members, ranks, strict=True):
            decided[index] = (rank, len(members), None)
    return decided


def registry_grow(n: int, *, workers: int | None = None, log=print) -> dict:
    """Add n synthetic runs (and their specs) to the registry in the current database."""
    from django.db import connection, connections, transaction

    from registry.cache import generation_bump
    from registry.models import BenchmarkRun, Environment, Implementation, Protocol, SourceImport, Workload
    from registry.services import imports
    from registry.services.run_keys import SPEC_MODELS, run_keys_of

    workers = workers or max(1, min(os.cpu_count() or 1, 4))
    with tempfile.TemporaryDirectory(prefix="ki_perf_grow_") as folder:
        jobs = [(n, w, workers, folder) for w in range(workers)]
        if workers == 1:
            shares = [_parse_share(jobs[0])]
        else:
            connections.close_all()  # nothing open crosses the fork
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                shares = pool.map(_parse_share, jobs)
        log(f"parsed {n} rows in {workers} processes")
        small = [s for _, part, _ in shares for s in part]
        specs = {}
        for _, _, part in shares:
            specs.update(part)
        with transaction.atomic():
            source = imports._source_get_or_create(liger.SOURCE)
            record = SourceImport.objects.create(
                source=source,
                filename=f"synthetic-{n}.csv",
                file_digest=digests.digest({"synthetic": n, "versions": VERSIONS, "gpus": GPUS}),
                rows=n,
                created=n,
            )
            by_attribute = defaultdict(list)
            for (attribute, _), row in specs.items():
                by_attribute[attribute].append(row)
            kernels = imports._kernels_ensure(by_attribute["kernel"])
            found = {
                model: imports._specs_ensure(model, by_attribute[attribute], attribute, kernels)
                for model, attribute in (
                    (Implementation, "implementation"),
                    (Workload, "workload"),
                    (Protocol, "protocol"),
                    (Environment, "environment"),
                )
            }
            first_pk = (BenchmarkRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
            decided = _supersede_and_rank(small, first_pk)
            del small
            fk = {
                "kernel": {slug: k.pk for slug, k in kernels.items()},
                "implementation": {d: o.pk for d, o in found[Implementation].items()},
                "workload": {d: o.pk for d, o in found[Workload].items()},
                "protocol": {d: o.pk for d, o in found[Protocol].items()},
                "environment": {d: o.pk for d, o in found[Environment].items()},
            }

            def runs():
                for path, _, _ in shares:
                    with open(path, "rb") as f:
                        while True:
                            try:
                                index, refs, run = pickle.load(f)
                            except EOFError:
                                break
                            rank, size, superseded_by = decided[index]
                            yield BenchmarkRun(
                                pk=first_pk + index,
                                source_id=source.pk,
                                first_import_id=record.pk,
                                rank=rank,
                                group_size=size,
                                superseded_by_id=superseded_by,
                                **{f"{name}_id": fk[name][ref] for name, ref in refs.items()},
                                # What run_keys_fill would copy, set here: COPY writes each row once.
                                **run_keys_of(
                                    **{name: found[SPEC_MODELS[name]][refs[name]] for name in SPEC_MODELS}
                                ),
                                **run,
                            )

            # Superseded rows point at rows later in pk order, so the self-reference is checked
            # at commit (Django's PostgreSQL foreign keys are DEFERRABLE INITIALLY DEFERRED).
            if connection.vendor == "postgresql":
                written = _copy_runs(connection, runs())
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT setval(pg_get_serial_sequence('registry_benchmarkrun', 'id'), "
                        "(SELECT max(id) FROM registry_benchmarkrun))"
                    )
            else:
                batch, written = [], 0
                ordered = sorted(runs(), key=lambda r: r.pk)  # small n only, off PostgreSQL
                for run in reversed(ordered):  # a superseding run exists before its predecessors
                    batch.append(run)
                    if len(batch) == imports.BATCH_SIZE:
                        BenchmarkRun.objects.bulk_create(batch)
                        written, batch = written + len(batch), []
                BenchmarkRun.objects.bulk_create(batch)
                written += len(batch)
            # COPY and bulk_create send no signals: stored pages must go stale as after an import.
            generation_bump()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return {"runs": written, "workers": workers}


def _copy_runs(connection, runs) -> int:
    """Write BenchmarkRun instances with COPY, each column prepared exactly as the ORM prepares
    it for an INSERT (so JSON, times and defaults are what bulk_create would store)."""
    from django.utils import timezone

    from registry.models import BenchmarkRun

    fields = [f for f in BenchmarkRun._meta.concrete_fields]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    now = timezone.now()
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        with raw.copy(f"COPY registry_benchmarkrun ({columns}) FROM STDIN") as copy:
            for run in runs:
                values = []
                for field in fields:
                    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                        value = now
                    else:
                        value = getattr(run, field.attname)
                    values.append(field.get_db_prep_save(value, connection))
                copy.write_row(values)
                count += 1
    return count
