#!/usr/bin/env python3
"""The first import against its own floor (issue 16): `liger_import` of the bundled CSV on
PostgreSQL, against PostgreSQL's COPY FROM of exactly the rows that import wrote.

    BENCH_PG_PREFIX=ki_h16_bench .venv/bin/python bench/import_floor.py [--rounds 3] [--profile]

Each round: a fresh database (`<BENCH_PG_PREFIX>_import`), migrated; the import timed around the
service call in a process of its own (bench/task.py `import`, as `manage.py import_liger` runs it);
then every table the import grew (the runs with their manifests, the specs, the kernels, the
import record) is copied out with COPY TO (only the rows above its largest id before the import)
and timed back with COPY FROM, all tables in one transaction as the import is, into empty copies:
`LIKE … INCLUDING ALL` (columns, defaults, checks, indexes; no foreign keys), and plain tables
without indexes. The ratio is the floor's seconds over the import's: the same rows, so the same
ratio of rates. `--profile`: one more import under cProfile, its time by area (parse, canonical
JSON and digests, ORM, the database driver, ...) and the top functions, and one more timed by
phase (up to the COPY of the runs, the COPY, up to the commit, the commit), each in wall seconds
and the CPU seconds of this process and of its PostgreSQL backend.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from bench import common  # noqa: E402

CSV = common.ROOT / "registry" / "sources" / "liger" / "data" / "all_benchmark_data.csv"


def largest_ids(conn) -> dict[str, int]:
    """Every table of the schema with an `id` column, and its largest id (0 when empty)."""
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'id' ORDER BY table_name"
        )
    ]
    return {t: conn.execute(f'SELECT coalesce(max(id), 0) FROM "{t}"').fetchone()[0] for t in tables}


def copy_out(conn, table: str, after: int) -> bytes:
    buffer = bytearray()
    with conn.cursor().copy(f'COPY (SELECT * FROM "{table}" WHERE id > {after:d}) TO STDOUT') as copy:
        for chunk in copy:
            buffer += chunk
    return bytes(buffer)


def backend_cpu(conn) -> float:
    """CPU seconds the connection's PostgreSQL backend has used (from /proc: the server is on
    this machine)."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def copy_in(url: str, dumps: dict[str, bytes], *, like: str) -> tuple[float, float]:
    """Seconds to COPY every dump into an empty copy of its table, in one transaction, and the
    CPU seconds its PostgreSQL backend spent on it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS floor CASCADE")
        conn.execute("CREATE SCHEMA floor")
        for table in dumps:
            conn.execute(f'CREATE TABLE floor."{table}" (LIKE public."{table}" {like})')
    with psycopg.connect(url) as conn:
        cpu = backend_cpu(conn)
        conn.commit()
        started = time.perf_counter()
        for table, data in dumps.items():
            with conn.cursor().copy(f'COPY floor."{table}" FROM STDIN') as copy:
                copy.write(data)
        conn.commit()
        seconds = time.perf_counter() - started
        cpu = backend_cpu(conn) - cpu
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA floor CASCADE")
    return seconds, cpu


def fresh_database() -> str:
    db = f"{common.PG_PREFIX}_import"
    common.pg_recreate(db)
    url = common.pg_url(db)
    common.manage(url, "migrate", "-v0")
    return url


def one_round() -> dict:
    url = fresh_database()
    with psycopg.connect(url) as conn:
        before = largest_ids(conn)
    imported = common.task(url, "import", CSV, 1)["imports"][0]
    with psycopg.connect(url) as conn:
        after = largest_ids(conn)
        grown = {t: before[t] for t in after if after[t] > before[t]}
        dumps = {t: copy_out(conn, t, grown[t]) for t in grown}
        rows = {
            t: conn.execute(f'SELECT count(*) FROM "{t}" WHERE id > %s', [grown[t]]).fetchone()[0]
            for t in grown
        }
    result = {
        "import_s": imported["seconds"],
        "rows_in_csv": imported.get("rows"),
        "rows_written": rows,
        "bytes_written": {t: len(d) for t, d in dumps.items()},
    }
    result["copy_indexed_s"], result["copy_indexed_server_cpu_s"] = copy_in(url, dumps, like="INCLUDING ALL")
    result["copy_plain_s"], result["copy_plain_server_cpu_s"] = copy_in(url, dumps, like="")
    common.pg_drop(f"{common.PG_PREFIX}_import")
    return result


def on_a_fresh_database(task: str) -> dict:
    """One import of the bundled CSV by `task` (bench/task.py: "import-profile" under cProfile,
    "import-phases" timed by phase) into a fresh migrated database, dropped after."""
    url = fresh_database()
    try:
        return common.task(url, task, CSV)
    finally:
        common.pg_drop(f"{common.PG_PREFIX}_import")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rounds = []
    for number in range(args.rounds):
        rounds.append(one_round())
        r = rounds[-1]
        print(
            f"round {number + 1}: import {r['import_s']:.2f} s, COPY {r['copy_indexed_s']:.3f} s "
            f"(indexed, {r['copy_indexed_server_cpu_s']:.2f} s PostgreSQL CPU) {r['copy_plain_s']:.3f} s "
            f"(plain), rows {r['rows_written']}",
            flush=True,
        )
    median = {
        key: statistics.median(r[key] for r in rounds)
        for key in (
            "import_s",
            "copy_indexed_s",
            "copy_plain_s",
            "copy_indexed_server_cpu_s",
            "copy_plain_server_cpu_s",
        )
    }
    rows = [
        {
            "floor": floor,
            "rows written": sum(rounds[0]["rows_written"].values()),
            "MB written": sum(rounds[0]["bytes_written"].values()) / 1e6,
            "import s": median["import_s"],
            "COPY s": median[key],
            "COPY's PostgreSQL CPU s": median[f"{key[:-2]}_server_cpu_s"],
            "import % of floor": 100 * median[key] / median["import_s"],
        }
        for floor, key in (
            ("COPY into indexed copies", "copy_indexed_s"),
            ("COPY into plain tables", "copy_plain_s"),
        )
    ]
    profiled = on_a_fresh_database("import-profile") if args.profile else None
    if profiled:
        print("\nwhere the import's time goes (cProfile, own time by area):", flush=True)
        for area, seconds in profiled["by_area"].items():
            print(f"  {area}: {seconds:.2f} s", flush=True)
    by_phase = on_a_fresh_database("import-phases") if args.profile else None
    common.report(
        "import-floor",
        f"First import of the bundled CSV on PostgreSQL against COPY of the rows it writes (median of {args.rounds})",
        list(rows[0]),
        rows,
        goal="first import >= 50% of the floor",
        rounds=rounds,
        profile=profiled,
        phases=by_phase,
    )
    if by_phase:
        table = common.table(
            f"One more first import by phase ({by_phase['seconds']} s in all; CPU from /proc)",
            list(by_phase["phases"][0]),
            by_phase["phases"],
        )
        print("\n" + table, flush=True)
        with (common.RESULTS / "import-floor.md").open("a") as results:
            results.write("\n" + table)


if __name__ == "__main__":
    main()
