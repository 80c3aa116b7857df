"""The load run (docs/reliability.md, item 14): locust, headless in a second process, against
KernelIndex as deployed on 127.0.0.1, while rerun jobs run one after another.

    python bench/load.py                       # the full run: 50 users, 3 minutes, bundled data
    python bench/load.py --users 20 --duration 20 --geglu-only   # what CI runs (tests/faults/test_load.py)

It needs PostgreSQL (--postgres, the server; default: the server of DATABASE_URL, else
postgres://postgres@127.0.0.1:5432) and redis-server on this machine. It creates a database of
its own there and drops it afterwards, starts a Redis of its own on a free port, gunicorn with the
production settings and a Celery worker with beat; stops all of them at the end; and prints one
JSON object: p50 / p95 / p99 in ms, requests, failures and the error rate, and the jobs.

Every virtual user comes from 127.0.0.1, so the anonymous API rate (one bucket per address) is
lifted for the run (bench/stack.py); everything else is as deployed.
"""

import argparse
import csv
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.servers import RedisServer, free_port  # noqa: E402
from bench.stack import Stack, data_csv  # noqa: E402

FINISHED = ("succeeded", "diverged", "failed", "cancelled")


def server_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


class Database:
    """A database of its own on the given server, dropped on exit."""

    def __init__(self, server: str, prefix: str = "kernelindex"):
        self.server, self.name = server.rstrip("/"), f"{prefix}_load_{secrets.token_hex(4)}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{self.server}/postgres", autocommit=True) as conn:
            conn.execute(sql)

    def __enter__(self) -> str:
        self._admin(f'CREATE DATABASE "{self.name}"')
        return f"{self.server}/{self.name}"

    def __exit__(self, *exc):
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def query(self, sql: str, *args) -> list[tuple]:
        import psycopg

        with psycopg.connect(f"{self.server}/{self.name}", connect_timeout=5) as conn:
            return conn.execute(sql, args).fetchall()


def slow_run_id(db: Database) -> int:
    return db.query(
        "SELECT r.id FROM registry_benchmarkrun r JOIN registry_environment e ON e.id = r.environment_id "
        "JOIN registry_implementation i ON i.id = r.implementation_id "
        "WHERE e.slug = 'cpu' AND i.provider = 'huggingface'"
    )[0][0]


def jobs(db: Database) -> list[tuple]:
    return db.query("SELECT id, state, attempts, started_at, finished_at FROM registry_rerunjob ORDER BY id")


def aggregated(stats_csv: Path) -> dict:
    with stats_csv.open(newline="") as handle:
        rows = {row["Name"]: row for row in csv.DictReader(handle)}
    total = rows["Aggregated"]
    requests, failures = int(total["Request Count"]), int(total["Failure Count"])
    return {
        "requests": requests,
        "failures": failures,
        "error_rate": round(failures / requests, 5) if requests else None,
        "requests_per_s": round(float(total["Requests/s"]), 1),
        "p50_ms": float(total["50%"]),
        "p95_ms": float(total["95%"]),
        "p99_ms": float(total["99%"]),
        "max_ms": float(total["Max Response Time"]),
        "pages": {
            name: {"requests": int(r["Request Count"]), "p95_ms": float(r["95%"])}
            for name, r in rows.items()
            if name != "Aggregated"
        },
    }


def failure_kinds(failures_csv: Path) -> list[str]:
    if not failures_csv.exists():
        return []
    with failures_csv.open(newline="") as handle:
        return [
            f"{r['Occurrences']} × {r['Method']} {r['Name']}: {r['Error']}" for r in csv.DictReader(handle)
        ]


def load_run(
    *,
    postgres: str,
    users: int,
    duration_s: int,
    geglu_only: bool,
    folder: Path,
    db_prefix: str = "kernelindex",
) -> dict:
    """`db_prefix` names the database made for the run (`<prefix>_load_<random>`)."""
    redis = RedisServer(folder / "redis", free_port(6400, 50)).start()
    db = Database(postgres, db_prefix)
    try:
        with db as database_url:
            site = Stack(
                folder / "site",
                database_url=database_url,
                broker_url=redis.url,
                port=free_port(8800, 50),
                web_workers=3,
            )
            try:
                site.prepare(data_csv(folder / "data.csv", bundled=True, geglu_only=geglu_only))
                site.start_web()
                site.start_worker()
                return _load_with_jobs(site, db, users=users, duration_s=duration_s, folder=folder)
            finally:
                site.stop()
    finally:
        redis.stop()


def _load_with_jobs(site: Stack, db: Database, *, users: int, duration_s: int, folder: Path) -> dict:
    run_id = slow_run_id(db)
    prefix = folder / "locust"
    command = [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "locustfile.py"), "--headless"]
    command += ["-u", str(users), "-r", str(max(users // 5, 1)), "-t", f"{duration_s}s"]
    command += ["-H", f"http://127.0.0.1:{site.port}", "--csv", str(prefix), "--only-summary"]
    command += ["--stop-timeout", "10", "--loglevel", "WARNING"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    with (folder / "locust.log").open("wb") as log:
        locust = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    requested = 0
    deadline = time.monotonic() + duration_s + 120
    try:
        time.sleep(min(5, duration_s / 4))  # the users arrive first
        # A rerun job runs all the time the users browse: the next one as soon as one finishes.
        while locust.poll() is None and time.monotonic() < deadline:
            states = [state for _, state, *_ in jobs(db)]
            if all(state in FINISHED for state in states):
                site.manage("request_rerun", str(run_id))
                requested += 1
            time.sleep(1)
    finally:
        if locust.poll() is None:
            locust.kill()
        locust.wait(timeout=60)
    end = time.monotonic() + 300
    while any(state not in FINISHED for _, state, *_ in jobs(db)) and time.monotonic() < end:
        time.sleep(1)
    finished = jobs(db)
    if not Path(f"{prefix}_stats.csv").exists():
        raise RuntimeError(f"locust wrote no statistics:\n{(folder / 'locust.log').read_text()[-4000:]}")
    return {
        "users": users,
        "duration_s": duration_s,
        **aggregated(Path(f"{prefix}_stats.csv")),
        "locust_exit": locust.returncode,
        "jobs": {
            "requested": requested,
            "states": [state for _, state, *_ in finished],
            "attempts": [attempts for _, _, attempts, *_ in finished],
            "seconds": [round((f - s).total_seconds(), 1) for *_, s, f in finished if s and f],
        },
        "failure_kinds": failure_kinds(Path(f"{prefix}_failures.csv")),
        "server_errors": site.log("gunicorn").count('" 50'),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=int, default=180, help="seconds")
    parser.add_argument("--geglu-only", action="store_true", help="import only the geglu rows (quicker)")
    default_server = (
        server_url(os.environ.get("DATABASE_URL", ""))
        if "postgres" in os.environ.get("DATABASE_URL", "")
        else "postgres://postgres@127.0.0.1:5432"
    )
    parser.add_argument("--postgres", default=default_server, help="the PostgreSQL server's URL")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kernelindex-load-") as folder:
        result = load_run(
            postgres=args.postgres,
            users=args.users,
            duration_s=args.duration,
            geglu_only=args.geglu_only,
            folder=Path(folder),
        )
    print(json.dumps(result, indent=2, default=str))
    ok = (
        result["failures"] == 0
        and result["jobs"]["states"]
        and all(s in ("succeeded", "diverged") for s in result["jobs"]["states"])
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
