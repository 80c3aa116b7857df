#!/usr/bin/env python3
"""The KernelIndex benchmark suite. Not part of the tests: it measures, it does not pass or fail.

    .venv/bin/python bench/run.py            # everything: bundled, 100k and 1M runs
    .venv/bin/python bench/run.py --quick    # minutes: bundled and 20k runs, short loads
    ... --only pages,queries --sizes bundled,100k --keep

Needs PostgreSQL and Redis on 127.0.0.1 (BENCH_PG_ADMIN, BENCH_REDIS_URL override them; Redis
db 7 by default) and `wrk` (apt-get install wrk). Each benchmark prints a Markdown table and
writes bench/results/<name>.json (and .md). Every timing is a ratio against a baseline measured
in the same run, because the machine is shared: the floor view for pages, PostgreSQL's COPY for
imports and exports. Databases are named ki_perf_*; they are dropped at the end unless --keep
(a later run with --keep reuses a registry of the right size instead of generating it again).
"""

import argparse
import concurrent.futures
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from bench import common  # noqa: E402

SIZES = {"bundled": 2448, "20k": 20_000, "100k": 100_000, "1M": 1_000_000}
PAGES = ["floor", "run page", "kernel page", "compare page", "api runs?kernel="]


def database(label: str) -> str:
    return f"{common.PG_PREFIX}_{label.lower()}" if label != "bundled" else common.PG_PREFIX


def run_count(db: str) -> int | None:
    if not common.pg_exists(db):
        return None
    try:
        with psycopg.connect(common.pg_url(db)) as conn:
            return conn.execute("SELECT count(*) FROM registry_benchmarkrun").fetchone()[0]
    except psycopg.Error:
        return None


def vacuum_analyze(db: str) -> None:
    """What autovacuum would do some time after a data migration, before anything is measured."""
    with psycopg.connect(common.pg_url(db), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def registry(label: str, log: dict) -> str:
    """The database holding a registry of this size: reused if it has exactly that many runs,
    otherwise built (migrate, bundled import, synthetic growth) and timed."""
    db, total = database(label), SIZES[label]
    url = common.pg_url(db)
    if run_count(db) == total:
        common.manage(url, "migrate", "-v0")  # picks up new index migrations
        vacuum_analyze(db)  # a migration that rewrote every run left as many dead rows
        return url
    common.pg_recreate(db)
    started = time.perf_counter()
    common.manage(url, "migrate", "-v0")
    print(f"[{label}] building a registry of {total:,} runs in {db} ...", flush=True)
    result = common.task(url, "grow", total)
    log[label] = {**result, "seconds_with_migrate": time.perf_counter() - started}
    print(f"[{label}] built in {log[label]['seconds_with_migrate']:.0f} s: {result}", flush=True)
    return url


# --- 1 and 2: pages against the floor, at each size ---------------------------------------------


COLD = " (cache off)"


def measure_pages(url: str, *, rounds: int, seconds: float, connections: int, cold: bool = False) -> dict:
    """Each page under wrk on the production server (page cache on, every URL stored once first:
    the steady state between two registry writes). With `cold`, a second server with
    PAGE_CACHE_SECONDS=0 runs beside it and its pages are measured in the same rounds, against
    the same floor: what every page costs on its first request after a write."""
    paths = common.task(url, "paths")
    servers = {"": {}, **({COLD: {"PAGE_CACHE_SECONDS": 0}} if cold else {})}
    with contextlib.ExitStack() as stack:
        bases = {suffix: stack.enter_context(common.server(url, **env)) for suffix, env in servers.items()}
        targets = {
            page + suffix: (base, paths[page])
            for suffix, base in bases.items()
            for page in paths
            if not (suffix and page == "floor")
        }
        for base, page_paths in targets.values():  # each target once, briefly: imports, connections warm
            common.wrk(base, page_paths, seconds=1, connections=connections)
        primed = prime(bases[""], [p for page, ps in paths.items() if page != "floor" for p in ps])
        samples = {name: [] for name in targets}
        for _ in range(rounds):
            for name, (base, page_paths) in targets.items():
                samples[name].append(common.wrk(base, page_paths, seconds=seconds, connections=connections))
    result = {"primed": primed}
    for page, runs in samples.items():
        result[page] = {
            "rps": common.median_of(runs, "rps"),
            "p50_ms": common.median_of(runs, "p50_ms"),
            "p99_ms": common.median_of(runs, "p99_ms"),
            "errors": sum(r["errors"] for r in runs),
            "urls": len(targets[page][1]),
            "rounds": runs,
        }
    return result


def prime(base: str, paths: list[str], headers: dict[str, str] | None = None) -> dict:
    """Ask for every URL once (4 at a time), so the measured rounds see stored pages; `headers`
    as the measured rounds send them (a gzip client's pages are stored apart)."""
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda path: common.get(base, path, headers)[0], paths))
    return {
        "urls": len(paths),
        "seconds": time.perf_counter() - started,
        "non-200": sum(s != 200 for s in statuses),
    }


def bench_pages(sizes: list[str], args, built: dict) -> None:
    by_size = {}
    for label in sizes:
        url = registry(label, built)
        print(f"[{label}] pages under wrk ...", flush=True)
        by_size[label] = measure_pages(
            url, rounds=args.rounds, seconds=args.seconds, connections=args.connections, cold=args.cold
        )
        primed = by_size[label].pop("primed", None)
        if primed:
            print(f"[{label}] primed the page cache: {primed}", flush=True)
    first = sizes[0]
    rows = []
    for page, m in by_size[first].items():
        floor = by_size[first]["floor"]
        rows.append(
            {
                "page": page,
                "rps": m["rps"],
                "% of floor rps": 100 * m["rps"] / floor["rps"],
                "p50 ms": m["p50_ms"],
                "p50 / floor p50": m["p50_ms"] / floor["p50_ms"],
                "p99 ms": m["p99_ms"],
                "p99 / floor p99": m["p99_ms"] / floor["p99_ms"],
                "non-2xx": m["errors"],
            }
        )
    common.report(
        "pages",
        f"1. Pages against the floor ({first} registry, gunicorn 2 sync workers, wrk -c{args.connections}, "
        f"median of {args.rounds} × {args.seconds:g} s)",
        list(rows[0]),
        rows,
        goal="each page >= 40% of the floor's requests per second",
        raw=by_size[first],
    )
    if len(sizes) < 2:
        return
    rows = []
    for page in by_size[first]:
        if page == "floor":
            continue
        row = {"page": page}
        base = by_size[first][page]["p50_ms"] / by_size[first]["floor"]["p50_ms"]
        for label in sizes:
            m, floor = by_size[label][page], by_size[label]["floor"]
            row[f"p50 ms {label}"] = m["p50_ms"]
            row[f"p50/floor {label}"] = m["p50_ms"] / floor["p50_ms"]
        for label in sizes[1:]:
            row[f"{label} vs {first}"] = (
                by_size[label][page]["p50_ms"] / by_size[label]["floor"]["p50_ms"]
            ) / base
        row["non-2xx"] = sum(by_size[label][page]["errors"] for label in sizes)
        rows.append(row)
    common.report(
        "scale",
        "2. Scale: p50 latency at each registry size, each against that run's floor, "
        f"then against the {first} size",
        list(rows[0]),
        rows,
        goal="p50 at 1,000,000 runs within 1.5x of the bundled size",
        sizes={label: SIZES[label] for label in sizes},
        built=built,
        raw=by_size,
    )


# --- 3: queries per page ------------------------------------------------------------------------


def bench_queries(sizes: list[str], args, built: dict) -> None:
    # The queries a page's rendering takes: with the page cache on, a repeated request takes none.
    counts = {label: common.task(registry(label, built), "queries", PAGE_CACHE_SECONDS=0) for label in sizes}
    rows = []
    for page in counts[sizes[0]]:
        row = {"page": page}
        for label in sizes:
            c = counts[label].get(page, {})
            row[label] = (
                f"{c.get('min')}" if c.get("min") == c.get("max") else f"{c.get('min')}–{c.get('max')}"
            )
        row["constant"] = "yes" if len({row[label] for label in sizes}) == 1 else "NO"
        rows.append(row)
    common.report(
        "queries",
        "3. SQL queries per request (20 URLs per page, anonymous, after one warm-up request)",
        list(rows[0]),
        rows,
        raw=counts,
    )


# --- 4: import ----------------------------------------------------------------------------------


def copy_floor(csv_path: Path, runs_db_url: str | None) -> dict:
    """PostgreSQL's own COPY, into plain tables (no index, no constraint) in ki_perf_copy: the
    CSV's rows as they are, and the run rows the importer wrote (exported with COPY TO)."""
    db = f"{common.PG_PREFIX}_copy"
    common.pg_recreate(db)
    out = {}
    with psycopg.connect(common.pg_url(db), autocommit=True) as conn:
        header = csv_path.open(encoding="utf-8").readline().strip().split(",")
        conn.execute("CREATE TABLE plain_csv (" + ", ".join(f'"{c}" text' for c in header) + ")")
        data = csv_path.read_bytes()
        started = time.perf_counter()
        with conn.cursor().copy("COPY plain_csv FROM STDIN (FORMAT csv, HEADER)") as copy:
            copy.write(data)
        out["csv_seconds"] = time.perf_counter() - started
        out["rows"] = conn.execute("SELECT count(*) FROM plain_csv").fetchone()[0]
    if runs_db_url:
        buffer = bytearray()
        with psycopg.connect(runs_db_url) as src:
            with src.cursor().copy("COPY registry_benchmarkrun TO STDOUT") as copy:
                for chunk in copy:
                    buffer += chunk
            columns = src.execute(
                "SELECT string_agg(quote_ident(column_name) || ' ' || format_type(a.atttypid, a.atttypmod), ', ' "
                "ORDER BY ordinal_position) FROM information_schema.columns c JOIN pg_attribute a "
                "ON a.attrelid = 'registry_benchmarkrun'::regclass AND a.attname = c.column_name "
                "WHERE table_name = 'registry_benchmarkrun'"
            ).fetchone()[0]
        with psycopg.connect(common.pg_url(db), autocommit=True) as conn:
            conn.execute(f"CREATE TABLE plain_runs ({columns})")
            started = time.perf_counter()
            with conn.cursor().copy("COPY plain_runs FROM STDIN") as copy:
                copy.write(bytes(buffer))
            out["runs_seconds"] = time.perf_counter() - started
            out["runs_rows"] = conn.execute("SELECT count(*) FROM plain_runs").fetchone()[0]
            out["runs_bytes"] = len(buffer)
    common.pg_drop(db)
    return out


def import_once(database_url: str, csv_path: Path, repeat: int) -> dict:
    return common.task(database_url, "import", csv_path, repeat)


def bench_import(args, built: dict) -> None:
    synthetic_rows = args.import_rows
    rows, raw = [], {}
    with tempfile.TemporaryDirectory(prefix="ki_perf_import_") as folder:
        files = {
            "bundled CSV (2,448 rows)": Path(
                common.ROOT / "registry/sources/liger/data/all_benchmark_data.csv"
            )
        }
        synthetic = Path(folder) / f"synthetic-{synthetic_rows}.csv"
        info = common.task(common.pg_url("postgres"), "write-csv", synthetic, synthetic_rows)
        print(f"wrote {synthetic_rows:,} synthetic rows in {info['seconds']:.0f} s", flush=True)
        files[f"synthetic CSV ({synthetic_rows:,} rows)"] = synthetic
        for name, path in files.items():
            pg_db = f"{common.PG_PREFIX}_import"
            backends = {
                "PostgreSQL": common.pg_url(pg_db),
                "SQLite": f"sqlite:///{folder}/import.sqlite3",
            }
            floor = None
            for backend, url in backends.items():
                if backend == "PostgreSQL":
                    common.pg_recreate(pg_db)
                else:
                    Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
                common.manage(url, "migrate", "-v0")
                print(f"import {name} on {backend} ...", flush=True)
                warm = import_once(url, path, 2)  # first import, then a re-import in the same process
                cold = import_once(url, path, 1)  # a re-import from a fresh process (cold caches)
                if backend == "PostgreSQL":
                    floor = copy_floor(path, url)
                    common.pg_drop(pg_db)
                first, again = warm["imports"]
                n = first["rows"]
                copy_rate = n / floor["csv_seconds"]
                runs_copy_rate = floor["runs_rows"] / floor["runs_seconds"]
                rows.append(
                    {
                        "file": name,
                        "database": backend,
                        "first import rows/s": n / first["seconds"],
                        "% of COPY csv": 100 * (n / first["seconds"]) / copy_rate,
                        "% of COPY runs": 100 * (n / first["seconds"]) / runs_copy_rate,
                        "first s": first["seconds"],
                        "re-import s (warm)": again["seconds"],
                        "first / re-import": first["seconds"] / again["seconds"],
                        "re-import s (new process)": cold["imports"][0]["seconds"],
                        "first / re-import (new)": first["seconds"] / cold["imports"][0]["seconds"],
                    }
                )
                raw[f"{name} / {backend}"] = {"warm": warm, "cold": cold, "copy": floor}
    common.report(
        "import",
        "4. Import: liger_import against PostgreSQL's COPY of the same rows into a plain table",
        list(rows[0]),
        rows,
        goal=">= 25% of COPY's rate; re-import of unchanged data >= 5x faster than the first import",
        note="'COPY csv': the CSV rows as text columns; 'COPY runs': the run rows the importer wrote "
        "(with their manifests), copied out and into a table without indexes or constraints.",
        raw=raw,
    )


# --- 5: export ----------------------------------------------------------------------------------


def worker_pids(master: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def stream(base: str, path: str) -> tuple[int, int, float]:
    """Download `path`, counting lines and bytes, without keeping the body."""
    import urllib.request

    started = time.perf_counter()
    lines = size = 0
    with urllib.request.urlopen(base + path, timeout=600) as response:
        while chunk := response.read(1 << 20):
            lines += chunk.count(b"\n")
            size += len(chunk)
    return lines, size, time.perf_counter() - started


def copy_out_rate(url: str) -> float:
    """Baseline: PostgreSQL's COPY TO of the runs joined to their kernels, GPUs and implementations."""
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        rows = 0
        sql = (
            "COPY (SELECT r.*, k.slug, e.slug, e.product, i.provider, i.project FROM registry_benchmarkrun r "
            "JOIN registry_kernel k ON k.id = r.kernel_id JOIN registry_environment e ON e.id = r.environment_id "
            "JOIN registry_implementation i ON i.id = r.implementation_id ORDER BY r.id) TO STDOUT"
        )
        with conn.cursor().copy(sql) as copy:
            for chunk in copy:
                rows += bytes(chunk).count(b"\n")
        return rows / (time.perf_counter() - started)


def bench_export(sizes: list[str], args, built: dict) -> None:
    rows, raw = [], {}
    for label in sizes:
        url = registry(label, built)
        baseline = copy_out_rate(url)
        for fmt, path in (("CSV", "/api/v1/export/runs.csv"), ("JSON Lines", "/api/v1/export/runs.jsonl")):
            with common.server(url, workers=1, timeout=600) as base:
                common.get(base, "/bench/floor/")
                (pid,) = worker_pids(common.SERVER_PIDS[base])
                floor_kib = vm_hwm_kib(pid)
                print(f"[{label}] export {fmt} ...", flush=True)
                lines, size, seconds = stream(base, path)
                peak_kib = vm_hwm_kib(pid)
            n = lines - (1 if fmt == "CSV" else 0)
            rows.append(
                {
                    "size": label,
                    "format": fmt,
                    "rows": n,
                    "rows/s": n / seconds,
                    "% of COPY TO rows/s": 100 * (n / seconds) / baseline,
                    "MB/s": size / seconds / 1e6,
                    "worker peak RSS MiB": peak_kib / 1024,
                    "above floor MiB": (peak_kib - floor_kib) / 1024,
                }
            )
            raw[f"{label} {fmt}"] = {"seconds": seconds, "bytes": size, "copy_to_rows_per_s": baseline}
    common.report(
        "export",
        "5. Export of the whole registry, streamed through gunicorn (1 sync worker)",
        list(rows[0]),
        rows,
        goal="peak memory flat as the registry grows",
        note="'above floor': the worker's peak RSS (VmHWM) after the export minus after one floor request.",
        raw=raw,
    )


# --- 6: rerun pipeline overhead -----------------------------------------------------------------


def bench_reruns(args) -> None:
    """Real Celery workers on Redis and PostgreSQL, the CPU harness (see bench/reruns.py)."""
    db = f"{common.PG_PREFIX}_reruns"
    common.pg_recreate(db)
    url = common.pg_url(db)
    try:
        common.manage(url, "migrate", "-v0")
        n = args.rerun_jobs or (6 if args.quick else 12)
        print(f"[reruns] {n} GEGLU workloads on the CPU worker: one at a time, batched, batched cold ...")
        result = common.task(url, "reruns", n, CELERY_TASK_ALWAYS_EAGER="0", LOG_LEVEL="INFO")
    finally:
        if not args.keep:
            common.pg_drop(db)
    rows = []
    for s in result["scenarios"]:
        how = "one at a time" if not s["batch"] else "batch of " + str(s["jobs"])
        rows.append(
            {
                "jobs": f"{how}, harness {'warm' if s['warm'] else 'cold (KERNELINDEX_HARNESS_WARM=0)'}",
                "request → last recorded s": s["request_to_last_recorded_s"],
                "harness s (sum)": s["harness_total_s"],
                "overhead / job s": s["overhead_per_job_s"],
                "median job overhead s": s["median_overhead_s"],
                "request → claim s (median)": s["median_queue_s"],
                "max job overhead s": s["max_overhead_s"],
                "harness s / job (median)": s["median_harness_s"],
                "child start s / job (median)": s["median_child_start_s"],
                "worker s / workload (claim → recorded, median)": s["worker_s_per_workload"],
            }
        )
    common.report(
        "reruns",
        "6. Rerun pipeline overhead (CPU worker, Redis, PostgreSQL)",
        list(rows[0]),
        rows,
        scenarios=result["scenarios"],
    )


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="bundled and 20k runs, short loads")
    parser.add_argument("--only", default="pages,queries,import,export", help="comma-separated benchmarks")
    parser.add_argument("--sizes", help="comma-separated registry sizes: " + ", ".join(SIZES))
    parser.add_argument("--keep", action="store_true", help="keep the ki_perf_* databases for the next run")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument(
        "--cold",
        action="store_true",
        help="pages: also measure a server with the page cache off, same rounds",
    )
    parser.add_argument("--import-rows", type=int)
    parser.add_argument("--rerun-jobs", type=int, help="workloads per rerun batch (6 quick, 12 otherwise)")
    args = parser.parse_args()
    sizes = (args.sizes or ("bundled,20k" if args.quick else "bundled,100k,1M")).split(",")
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (3 if args.quick else 8)
    args.import_rows = args.import_rows or (20_000 if args.quick else 100_000)
    only = args.only.split(",")
    built: dict = {}
    started = time.perf_counter()
    try:
        if "pages" in only:
            bench_pages(sizes, args, built)
        if "queries" in only:
            bench_queries(sizes, args, built)
        if "import" in only:
            bench_import(args, built)
        if "export" in only:
            bench_export(sizes, args, built)
        if "reruns" in only:
            bench_reruns(args)
    finally:
        if not args.keep and set(only) & {"pages", "queries", "import", "export"}:
            for label in sizes:
                common.pg_drop(database(label))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"\ndone in {time.perf_counter() - started:.0f} s (children CPU {usage.ru_utime + usage.ru_stime:.0f} s, "
        f"load average now {os.getloadavg()[0]:.1f}); results in {common.RESULTS}"
    )
    if built:
        print("registries built:", {k: round(v["seconds_with_migrate"]) for k, v in built.items()})


if __name__ == "__main__":
    main()
