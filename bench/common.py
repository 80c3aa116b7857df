"""What every benchmark shares: databases, the production-like server, wrk, tables and JSON.

Nothing here imports Django: the orchestrator (bench/run.py) drives Django work in child
processes (bench/task.py), one per database, so each size gets its own settings."""

import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
PYTHON = sys.executable
PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgres://postgres@127.0.0.1:5432/postgres")
PG_PREFIX = os.environ.get("BENCH_PG_PREFIX", "ki_perf")  # every database it makes starts so
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")
SERVER_PIDS: dict[str, int] = {}  # base URL -> gunicorn master pid, while it runs


def pg_url(db: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + db


def pg_exists(db: str) -> bool:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db]).fetchone() is not None


def pg_recreate(db: str) -> None:
    assert db.startswith(PG_PREFIX), db  # never touch anyone else's database
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')


def pg_drop(db: str) -> None:
    assert db.startswith(PG_PREFIX), db
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def pg_version() -> str:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


def django_env(database_url: str, **extra) -> dict:
    """Production settings (DEBUG off) for plain http on 127.0.0.1, with the benchmark's own
    Redis db for the cache. The anonymous API throttle is raised so the load generator measures
    the endpoint, not the 429 page; the throttle's cache round trip still happens per request."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        PYTHONPATH=str(ROOT),
        DEBUG="0",
        SECRET_KEY="bench-only-not-secret",
        SECURE_SSL_REDIRECT="0",
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        ALLOWED_HOSTS="127.0.0.1,testserver",
        DATABASE_URL=database_url,
        CACHE_URL=REDIS_URL,
        CELERY_BROKER_URL=REDIS_URL,
        CELERY_TASK_ALWAYS_EAGER="1",
        API_ANON_RATE="100000000/minute",
        CONN_MAX_AGE="600",
        LOG_LEVEL="WARNING",
        KERNELINDEX_VAR_DIR=str(Path(tempfile.gettempdir()) / "ki_perf_var"),
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def task(database_url: str, *args, capture: bool = True, **extra) -> dict | None:
    """Run one bench/task.py command in a child process; it prints one JSON line last."""
    cmd = [PYTHON, str(BENCH / "task.py"), *map(str, args)]
    result = subprocess.run(
        cmd, cwd=ROOT, env=django_env(database_url, **extra), text=True, capture_output=capture
    )
    if result.returncode != 0:
        sys.stderr.write((result.stdout or "") + (result.stderr or ""))
        raise SystemExit(f"bench task failed: {' '.join(cmd)}")
    if not capture:
        return None
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def manage(database_url: str, *args) -> None:
    subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=django_env(database_url),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server(database_url: str, *, workers: int = 2, timeout: int = 60, **extra):
    """gunicorn with the production settings on 127.0.0.1; always stopped on the way out.
    `extra`: more environment variables (PAGE_CACHE_SECONDS=0 for a server without page cache)."""
    static_root = Path(tempfile.mkdtemp(prefix="ki_perf_static_"))
    env = django_env(database_url, BENCH_STATIC_ROOT=static_root, **extra)
    subprocess.run([PYTHON, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "gunicorn",
            "kernelindex.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "sync",
            "--log-level",
            "warning",
            "--timeout",
            str(timeout),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/bench/floor/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("gunicorn did not start")
            time.sleep(0.3)
        SERVER_PIDS[base] = proc.pid
        yield base
    finally:
        SERVER_PIDS.pop(base, None)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(static_root, ignore_errors=True)


def get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(base + path, headers=headers or {}), timeout=30
        ) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wrk(
    base: str,
    paths: list[str],
    *,
    seconds: float,
    connections: int = 4,
    threads: int = 1,
    headers: dict[str, str] | None = None,
) -> dict:
    """One bounded wrk run over `paths` (cycled); returns rps and latency percentiles in ms.
    `headers`: sent with every request (a signed-in visitor's session cookie)."""
    header_args = [arg for name, value in (headers or {}).items() for arg in ("-H", f"{name}: {value}")]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(paths) + "\n")
        paths_file = f.name
    try:
        out = subprocess.run(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                *header_args,
                "-s",
                str(BENCH / "report.lua"),
                base,
                "--",
                paths_file,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 60,
        ).stdout
    finally:
        os.unlink(paths_file)
    line = next(line for line in out.splitlines() if line.startswith("WRKJSON "))
    raw = json.loads(line[len("WRKJSON ") :])
    seconds_run = raw["duration_us"] / 1e6
    return {
        "requests": raw["requests"],
        "rps": raw["requests"] / seconds_run,
        "p50_ms": raw["p50_us"] / 1000,
        "p90_ms": raw["p90_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "errors": raw["non2xx"] + raw["socket_errors"],
    }


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def machine() -> dict:
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "postgresql": pg_version(),
        "wrk": shutil.which("wrk") is not None,
    }


def fmt(value) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(title: str, columns: list[str], rows: list[dict]) -> str:
    """A Markdown table (printed, and pasted as-is into docs/performance.md)."""
    lines = [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def report(name: str, title: str, columns: list[str], rows: list[dict], **meta) -> None:
    text = table(title, columns, rows)
    print("\n" + text, flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": name,
        "title": title,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "columns": columns,
        "rows": rows,
        **meta,
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    (RESULTS / f"{name}.md").write_text(text)
