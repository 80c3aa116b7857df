#!/usr/bin/env python3
"""The production shape on one machine: gunicorn, a Celery worker for the default queue,
Celery beat, and optionally GPU workers, against local PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kernelindex \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        python3 scripts/prod.py up [--port 8000] [--web-workers 2] [--gpu cpu] [--load-data]
    python3 scripts/prod.py status
    python3 scripts/prod.py down

`up` creates the database if it is missing, migrates, collects static files, starts every
process in its own session (logs and pid files under var/prod/), and returns once /readyz
answers 200. `down` stops them (SIGTERM, then SIGKILL after 30 s). The settings are the
production ones (DEBUG off, JSON logs), except that there is no TLS in front, so the secure-cookie
and HTTPS-redirect settings are off unless set. docs/deploy.md describes the real deployment.
"""

import argparse
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = Path(os.environ.get("KERNELINDEX_PYTHON", ROOT / ".venv" / "bin" / "python"))
if not PYTHON.exists():
    PYTHON = Path(sys.executable)


def state_dir() -> Path:
    var = Path(os.environ.get("KERNELINDEX_VAR_DIR", ROOT / "var"))
    return var / "prod"


def environment(port: int) -> dict:
    env = dict(os.environ)
    database, broker = env.get("DATABASE_URL", ""), env.get("CELERY_BROKER_URL", "")
    if not database.startswith(("postgres://", "postgresql://")):
        sys.exit("DATABASE_URL must point at PostgreSQL, e.g. postgres://postgres@127.0.0.1:5432/kernelindex")
    if not broker.startswith("redis://"):
        sys.exit("CELERY_BROKER_URL must point at Redis, e.g. redis://127.0.0.1:6379/0")
    folder = state_dir()
    secret_file = folder / "secret-key"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(50))
        secret_file.chmod(0o600)
    env.setdefault("SECRET_KEY", secret_file.read_text().strip())
    env.setdefault("DEBUG", "0")
    env.setdefault("CACHE_URL", broker)
    env.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
    env.setdefault("SITE_URL", f"http://127.0.0.1:{port}")
    env.setdefault("LOG_FORMAT", "json")
    # No TLS on one machine; behind the real proxy these stay on (their defaults).
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        env.setdefault(name, "0")
    env.setdefault("SECURE_HSTS_SECONDS", "0")
    env["PROMETHEUS_MULTIPROC_DIR"] = str(folder / "prometheus")
    env["GUNICORN_BIND"] = f"127.0.0.1:{port}"
    return env


# What an operator's shell needs to run manage.py against this deployment (`operator_env_write`).
OPERATOR_VARIABLES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "SITE_URL",
    "LOG_FORMAT",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "KERNELINDEX_VAR_DIR",
    "JOB_SIGNING_KEY",
    "METRICS_TOKEN",
)


def operator_env_write(env: dict) -> Path:
    """var/prod/env: the settings the processes were started with, as shell assignments
    (readable by the owner only: it holds SECRET_KEY). `set -a; . var/prod/env; set +a` gives an
    operator's shell the same settings, so `manage.py moderator_add` and the like work there."""
    path = state_dir() / "env"
    lines = [f"{name}={shlex.quote(env[name])}" for name in OPERATOR_VARIABLES if env.get(name)]
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(
        "# Written by scripts/prod.py up. Load it with: set -a; . THIS_FILE; set +a\n"
        + "\n".join(lines)
        + "\n"
    )
    return path


def database_ensure(env: dict) -> None:
    """Create the database named by DATABASE_URL if it does not exist yet."""
    parts = urlsplit(env["DATABASE_URL"])
    name = parts.path.lstrip("/")
    server = urlunsplit(parts._replace(path="/postgres"))
    code = (
        "import sys, psycopg\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
        "    if not c.execute('SELECT 1 FROM pg_database WHERE datname = %s', [sys.argv[2]]).fetchone():\n"
        "        c.execute('CREATE DATABASE \"%s\"' % sys.argv[2].replace('\"', ''))\n"
    )
    subprocess.run([PYTHON, "-c", code, server, name], check=True, cwd=ROOT)


def manage(env: dict, *args: str) -> None:
    print("+ manage.py", " ".join(args), flush=True)
    subprocess.run([PYTHON, "manage.py", *args], check=True, cwd=ROOT, env=env)


def processes(args) -> dict[str, list[str]]:
    celery = [str(PYTHON), "-m", "celery", "-A", "kernelindex"]
    folder = state_dir()
    shape = {
        "web": [
            str(PYTHON),
            "-m",
            "gunicorn",
            "kernelindex.wsgi",
            "-c",
            "deploy/gunicorn.conf.py",
            "--workers",
            str(args.web_workers),
        ],
        "worker": [
            *celery,
            "worker",
            "-Q",
            "default",
            "-c",
            str(args.concurrency),
            "-n",
            "default@%h",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
        ],
        "beat": [*celery, "beat", "-l", "INFO", "--schedule", str(folder / "celerybeat-schedule")],
    }
    for gpu in args.gpu:
        shape[f"gpu-{gpu}"] = [
            *celery,
            "worker",
            "-Q",
            f"gpu.{gpu}",
            "-c",
            "1",
            "-n",
            f"gpu-{gpu}@%h",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
        ]
    return shape


def up(args) -> None:
    folder = state_dir()
    (folder / "log").mkdir(parents=True, exist_ok=True)
    if running():
        sys.exit(f"already running: {', '.join(running())}; run `scripts/prod.py down` first")
    env = environment(args.port)
    operator_env = operator_env_write(env)
    database_ensure(env)
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    if args.load_data:
        manage(env, "load_bundled_data")
    for name, command in processes(args).items():
        log = (folder / "log" / f"{name}.log").open("ab")
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        (folder / f"{name}.pid").write_text(str(process.pid))
        print(f"started {name} (pid {process.pid}), log: {folder / 'log' / f'{name}.log'}", flush=True)
    ready_wait(args.port, timeout=args.timeout)
    print(
        f"KernelIndex is up on http://127.0.0.1:{args.port}/ (readyz: 200). Stop it with: scripts/prod.py down\n"
        f"manage.py in another shell needs these settings first: set -a; . {operator_env}; set +a"
    )


def ready_wait(port: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
            body = getattr(exc, "read", None)
            if body:
                last = body().decode(errors="replace")
        dead = [name for name in pids() if name not in running()]
        if dead:
            down(None)
            sys.exit(f"{', '.join(dead)} exited during start; see {state_dir() / 'log'}")
        time.sleep(0.5)
    down(None)
    sys.exit(f"not ready after {timeout:.0f} s: {last}")


def pids() -> dict[str, int]:
    found = {}
    for path in sorted(state_dir().glob("*.pid")):
        try:
            found[path.stem] = int(path.read_text().strip())
        except ValueError:
            path.unlink()
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie we started and nobody reaped counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def running() -> list[str]:
    return [name for name, pid in pids().items() if alive(pid)]


def down(args) -> None:
    found = pids()
    for pid in found.values():
        if alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)  # each process leads its own session and group
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(pid) for pid in found.values()):
        time.sleep(0.2)
    for name, pid in found.items():
        if alive(pid):
            print(f"{name} (pid {pid}) ignored SIGTERM for 30 s; killing it", flush=True)
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        (state_dir() / f"{name}.pid").unlink(missing_ok=True)
    print(f"stopped: {', '.join(found) or 'nothing was running'}")


def status(args) -> None:
    print(json.dumps({name: {"pid": pid, "alive": alive(pid)} for name, pid in pids().items()}, indent=2))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("up")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--web-workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=2, help="processes of the default worker")
    p.add_argument("--gpu", action="append", default=[], help="also start a worker for gpu.<SLUG>")
    p.add_argument("--load-data", action="store_true", help="import the bundled data after migrating")
    p.add_argument("--timeout", type=float, default=90)
    p.set_defaults(handler=up)
    commands.add_parser("down").set_defaults(handler=down)
    commands.add_parser("status").set_defaults(handler=status)
    args = parser.parse_args(argv)
    state_dir().mkdir(parents=True, exist_ok=True)
    args.handler(args)


if __name__ == "__main__":
    main()
