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

Each party gets only its own credentials, as docs/deploy.md sets them up: the web tier, the
default worker and beat share a Redis ACL user and var/prod/web.env; each `--gpu` worker gets a
Redis ACL user limited to the broker's keys of its own queue, an Ed25519 worker key registered for
its GPU model, and var/prod/gpu-<SLUG>/env without DATABASE_URL, CACHE_URL, SECRET_KEY or the
job-signing key (it runs with that file's settings only). `down` deletes the ACL users.
"""

import argparse
import hashlib
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
    job_key_file = folder / "job-signing-key"
    if not job_key_file.exists():
        job_key_file.write_text(secrets.token_urlsafe(48))
        job_key_file.chmod(0o600)
    env.setdefault("JOB_SIGNING_KEY", job_key_file.read_text().strip())
    return env


# --- Redis ACL users: the web tier's, and one per GPU worker (docs/deploy.md, "Grants") ----------


def acl_tag() -> str:
    """Names this deployment's ACL users apart from any other on the same Redis."""
    return hashlib.sha256(str(state_dir().resolve()).encode()).hexdigest()[:8]


def web_acl_rules() -> list[str]:
    # The web tier, the default worker and beat are trusted with every key (broker and cache).
    return ["~*", "&*", "+@all", "-@admin"]


def gpu_acl_rules(gpu: str, prefix: str = "") -> list[str]:
    """What a GPU worker needs of the broker, and nothing else: its own queue (and kombu's
    priority lists of it), the default queue to push its signed reports to (write only: it cannot
    read or take the central worker's tasks), kombu's bindings and unacknowledged-message
    bookkeeping, the answers to its claims, and celery's remote control (the admin's Operations
    page asks workers which queues they serve). Never the cache's keys
    (`web:*`, sessions among them), never SCAN or KEYS (key names would give away session ids),
    never another database's keys by SELECT, since key patterns hold in every database. `prefix`:
    the deployment's CELERY_BROKER_KEY_PREFIX, which kombu puts before every broker key."""
    return [
        f"~{prefix}gpu.{gpu}",
        f"~{prefix}gpu.{gpu}\x06\x16*",
        f"%W~{prefix}default",
        f"%W~{prefix}default\x06\x16*",
        f"~{prefix}_kombu.*",
        f"~{prefix}unacked",
        f"~{prefix}unacked_index",
        f"~{prefix}unacked_mutex",
        "~celery-task-meta-*",
        "~*.celery.pidbox*",
        "&*",
        "+@all",
        "-@admin",
        "-@dangerous",
        "-scan",
        "-keys",
        "-randomkey",
    ]


ACL_CODE = (
    "import json, sys, redis\n"
    "r = redis.Redis.from_url(sys.argv[1])\n"
    "for name, password, rules in json.loads(sys.argv[2]):\n"
    "    if password is None:\n"
    "        r.execute_command('ACL', 'DELUSER', name)\n"
    "    else:\n"
    "        r.execute_command('ACL', 'SETUSER', name, 'reset', 'on', '>' + password, *rules)\n"
)


def acl_apply(admin_url: str, users: list, *, check: bool = True) -> bool:
    """Set (name, password, rules) users, or delete (name, None, None) ones, as the operator."""
    done = subprocess.run([PYTHON, "-c", ACL_CODE, admin_url, json.dumps(users)], check=check, cwd=ROOT)
    return done.returncode == 0


def url_as(url: str, user: str, password: str, db: int | None = None) -> str:
    parts = urlsplit(url)
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    path = f"/{db}" if db is not None else parts.path
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}", path=path))


def acl_users(args) -> dict[str, str]:
    tag = acl_tag()
    return {"web": f"ki-web-{tag}", **{gpu: f"ki-gpu-{gpu}-{tag}" for gpu in args.gpu}}


def web_credentials(env: dict, args) -> None:
    """The web tier's own Redis user, in its broker and cache URLs."""
    password = secrets.token_urlsafe(32)
    name = acl_users(args)["web"]
    acl_apply(env["CELERY_BROKER_URL"], [[name, password, web_acl_rules()]])
    env["REDIS_ADMIN_URL"] = env["CELERY_BROKER_URL"]
    env["CELERY_BROKER_URL"] = url_as(env["CELERY_BROKER_URL"], name, password)
    env["CACHE_URL"] = url_as(env["CACHE_URL"], name, password)
    with (state_dir() / "acl-users").open("a") as out:
        out.write(name + "\n")


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
    "REDIS_ADMIN_URL",
)


def web_env_write(env: dict) -> Path:
    """var/prod/web.env: what the web tier, the default worker and beat run with (mode 0600)."""
    path = state_dir() / "web.env"
    names = [name for name in OPERATOR_VARIABLES if name != "REDIS_ADMIN_URL"]
    _env_file_write(path, {name: env[name] for name in names if env.get(name)})
    return path


def _env_file_write(path: Path, values: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    lines = [f"{name}={shlex.quote(str(value))}" for name, value in values.items()]
    path.write_text(
        "# Written by scripts/prod.py up. Load it with: set -a; . THIS_FILE; set +a\n"
        + "\n".join(lines)
        + "\n"
    )


# What a GPU worker runs with, and all it runs with: no DATABASE_URL, CACHE_URL, SECRET_KEY or
# JOB_SIGNING_KEY (kernelindex/settings.py refuses to start a gpu-worker given one of them).
GPU_BASE_VARIABLES = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    "KERNELINDEX_HARNESS_DIR",
    "KERNELINDEX_HARNESS_ARCHIVE",
)


def gpu_worker_setup(env: dict, args, gpu: str) -> dict:
    """The GPU worker's own Redis user, key (made and registered) and env file; its environment."""
    folder = state_dir() / f"gpu-{gpu}"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    name = acl_users(args)[gpu]
    password = secrets.token_urlsafe(32)
    prefix = env.get("CELERY_BROKER_KEY_PREFIX", "")
    acl_apply(env["REDIS_ADMIN_URL"], [[name, password, gpu_acl_rules(gpu, prefix)]])
    with (state_dir() / "acl-users").open("a") as out:
        out.write(name + "\n")
    worker = f"prod-{gpu}-{acl_tag()}"
    key_file = folder / "worker.key"
    verify_key = _manage_output(env, "worker_key", "job-key")
    if not key_file.exists():
        public = _manage_output(env, "worker_key", "generate", "--out", str(key_file))
        cards = [f"--card={card}" for card in _local_cards(gpu)]
        manage(env, "worker_key", "register", worker, "--gpu", gpu, "--public-key", public, *cards)
    values = {
        "KERNELINDEX_ROLE": "gpu-worker",
        "DEBUG": "0",
        "LOG_FORMAT": env.get("LOG_FORMAT", "json"),
        "KERNELINDEX_VAR_DIR": str(folder / "var"),
        "CELERY_BROKER_URL": url_as(env["REDIS_ADMIN_URL"], name, password),
        **({"CELERY_BROKER_KEY_PREFIX": prefix} if prefix else {}),
        "JOB_VERIFY_KEY": verify_key,
        "WORKER_NAME": worker,
        "WORKER_KEY_FILE": str(key_file),
        **{
            k: env[k]
            for k in env
            if k.startswith(("JOB_", "CONTROLLED_", "CELERY_VISIBILITY")) and k != "JOB_SIGNING_KEY"
        },
    }
    _env_file_write(folder / "env", values)
    return {**{k: os.environ[k] for k in GPU_BASE_VARIABLES if k in os.environ}, **values}


def _manage_output(env: dict, *args: str) -> str:
    out = subprocess.run(
        [PYTHON, "manage.py", *args], check=True, cwd=ROOT, env=env, capture_output=True, text=True
    )
    return out.stdout.strip()


def _local_cards(gpu: str) -> list[str]:
    """The NVML UUIDs of this host's cards of model `gpu` (none for the CPU)."""
    if gpu == "cpu":
        return []
    code = "from registry.reruns.harness import local_gpus\nfor slug, uuid in local_gpus(): print(slug, uuid)"
    out = subprocess.run([PYTHON, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return [
        uuid for slug, _, uuid in (line.partition(" ") for line in out.stdout.splitlines()) if slug == gpu
    ]


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
    web_credentials(env, args)
    operator_env = operator_env_write(env)
    web_env_write(env)
    database_ensure(env)
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    if args.load_data:
        manage(env, "load_bundled_data")
    web_env = {k: v for k, v in env.items() if k != "REDIS_ADMIN_URL"}
    envs = {f"gpu-{gpu}": gpu_worker_setup(env, args, gpu) for gpu in args.gpu}
    for name, command in processes(args).items():
        log = (folder / "log" / f"{name}.log").open("ab")
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=envs.get(name, web_env),
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
    acl_users_delete()
    print(f"stopped: {', '.join(found) or 'nothing was running'}")


def acl_users_delete() -> None:
    """Delete the ACL users `up` made (their passwords are in files that are stale from now on)."""
    listed = state_dir() / "acl-users"
    admin = os.environ.get("REDIS_ADMIN_URL") or os.environ.get("CELERY_BROKER_URL", "")
    if not listed.exists() or not admin.startswith("redis://"):
        return
    names = sorted(set(listed.read_text().split()))
    if acl_apply(admin, [[name, None, None] for name in names], check=False):
        listed.unlink()
    else:
        print(
            f"could not delete the Redis ACL users {', '.join(names)} as {admin.split('@')[-1]}", flush=True
        )


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
