#!/usr/bin/env python3
"""The two README commands: `python3 scripts/dev.py run` and `python3 scripts/dev.py test`.

Needs only Python 3.11+ and git. `run` makes `.venv`, installs, migrates, loads the bundled data
and serves the site on http://127.0.0.1:8000 (`--port N` for another port) with a Celery worker
beside it (SQLite and the embedded filesystem broker unless DATABASE_URL / CELERY_BROKER_URL say
otherwise). `test` installs what the tests need (axe-core through `npm ci` where npm is) and runs
the whole suite; extra arguments go to pytest.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
# The CPU build of torch that these machines keep on disk; any other spelling downloads CUDA.
TORCH = "torch==2.13.0"


def sh(*args, env=None):
    print("+", " ".join(map(str, args)), flush=True)
    subprocess.run([str(a) for a in args], check=True, cwd=ROOT, env=env)


def ensure_venv():
    if not PYTHON.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        sh(PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip")


def pip_install(*requirements):
    sh(PYTHON, "-m", "pip", "install", "-q", *requirements)


def ensure_chromium():
    """Browser tests drive Debian's chromium through Playwright (never `playwright install`)."""
    if Path("/usr/bin/chromium").exists():
        return
    if shutil.which("apt-get") and os.geteuid() == 0:
        sh("apt-get", "update", "-qq")
        sh("apt-get", "install", "-y", "-qq", "chromium")
    else:
        print("chromium is not installed and cannot be installed here; browser tests will be skipped.")


def ensure_axe_core():
    """The browser tests inject axe-core, pinned in package-lock.json, from node_modules/."""
    if (ROOT / "node_modules" / "axe-core" / "axe.min.js").exists():
        return
    if shutil.which("npm"):
        sh("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
    else:
        print("npm is not installed; the accessibility checks of the browser tests will be skipped.")


def ensure_worker_requirements():
    """The CPU harness runs in the test suite; torch goes first so pip keeps the CPU build."""
    worker = ROOT / "requirements-worker.txt"
    if worker.exists():
        pip_install(TORCH)
        pip_install("-r", worker)


DEVELOPMENT_ENV = """\
# Written by `python3 scripts/dev.py run` for local development; .env.example lists every
# variable. The process environment wins over this file. Never use DEBUG=1 in production.
DEBUG=1
"""


def dotenv_ensure():
    """The README's `.venv/bin/python manage.py ...` commands read settings from `.env`, as
    runserver does: without DEBUG=1 there, production settings would ask for a SECRET_KEY."""
    dotenv = ROOT / ".env"
    if not dotenv.exists():
        dotenv.write_text(DEVELOPMENT_ENV)
        print(f"wrote {dotenv.relative_to(ROOT)} (DEBUG=1, for development)", flush=True)


def base_env(**extra):
    env = dict(os.environ)
    env.setdefault("DEBUG", "1")
    env.update(extra)
    return env


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def children_stop(children: list[subprocess.Popen], grace: float = 20) -> None:
    """Each child leads a process group of its own (runserver's autoreloader and Celery's pool
    are grandchildren): the whole group gets SIGTERM, then SIGKILL if it outlives the grace, so no
    grandchild keeps holding the port."""
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        # The leader may be gone while the group lives on.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)


def run(port: int = 8000):
    ensure_venv()
    dotenv_ensure()
    pip_install("-r", ROOT / "requirements.txt")
    env = base_env()
    manage = [PYTHON, ROOT / "manage.py"]
    sh(*manage, "migrate", "--noinput", env=env)
    sh(*manage, "load_bundled_data", env=env)
    # A SIGTERM (from a supervisor or `timeout`) stops both children, like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    children = []
    try:
        children.append(celery_worker_start(env))
        print(f"+ {PYTHON} manage.py runserver 127.0.0.1:{port}", flush=True)
        server = subprocess.Popen(
            [PYTHON, ROOT / "manage.py", "runserver", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        children.append(server)
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        children_stop(children)


def celery_worker_start(env) -> subprocess.Popen:
    return subprocess.Popen(
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "kernelindex",
            "worker",
            "-Q",
            "default",
            "-c",
            "1",
            "-l",
            "info",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def test(pytest_args):
    ensure_venv()
    pip_install("-r", ROOT / "requirements-test.txt")
    ensure_worker_requirements()
    ensure_chromium()
    ensure_axe_core()
    sys.exit(
        subprocess.run([PYTHON, "-m", "pytest", *parallel(pytest_args)], cwd=ROOT, env=base_env()).returncode
    )


def parallel(pytest_args: list[str]) -> list[str]:
    """Two pytest-xdist workers where there are two cores (KERNELINDEX_TEST_WORKERS=N for N, 0 for
    none; `-n` among the arguments wins). tests/settings.py gives each worker its own var/ folder,
    test database, broker and cache key prefixes; tests/conftest.py keeps a module with shared
    set-up on one worker (`--dist loadgroup`) and starts the slowest modules first."""
    workers = os.environ.get("KERNELINDEX_TEST_WORKERS", "") or str(min(os.cpu_count() or 1, 2))
    if workers in ("0", "1") or any(a.startswith(("-n", "--numprocesses")) for a in pytest_args):
        return pytest_args
    return ["-n", workers, "--dist", "loadgroup", "--no-loadscope-reorder", *pytest_args]


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "run":
        arguments = sys.argv[2:]
        if arguments[:1] == ["--port"] and len(arguments) == 2 and arguments[1].isdigit():
            run(port=int(arguments[1]))
        elif arguments:
            sys.exit("usage: python3 scripts/dev.py run [--port N]")
        else:
            run()
    elif command == "test":
        test(sys.argv[2:])
    else:
        sys.exit("usage: python3 scripts/dev.py run [--port N] | test [pytest arguments]")
