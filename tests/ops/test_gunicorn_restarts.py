"""Worker restarts in deploy/gunicorn.conf.py, with real gunicorn: no recycling by request count;
a worker past the memory limit leaves after its request, one worker of the server at a time (not
while the last one's successor boots) and never two within RESTART_SPACING_S; the others serve
meanwhile, so no request fails."""

import http.client
import os
import re
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "deploy" / "gunicorn.conf.py"
SPACING_S = 2.0
GUARD = re.compile(
    r"memory guard: worker (\d+) at \d+ MB \(limit 1 MB\) restarts after \d+ requests; t=([\d.]+)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    def __init__(self, tmp_path: Path, **env):
        self.port = _free_port()
        self.log_path = tmp_path / "gunicorn.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))},
            "DJANGO_SETTINGS_MODULE": "kernelindex.settings",
            "DEBUG": "1",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "CACHE_URL": "",
            "KERNELINDEX_VAR_DIR": str(tmp_path / "var"),
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "LOG_FORMAT": "text",
            **env,
        }
        self.process = None

    def __enter__(self):
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", str(CONF), "kernelindex.wsgi"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while self.get("/healthz") != 200:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"gunicorn did not answer:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, method: str = "GET") -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            response.read()
            return response.status
        except OSError:
            return 0
        finally:
            connection.close()


def _restarts(server: "Gunicorn") -> list[tuple[int, float]]:
    return [(int(pid), float(t)) for pid, t in GUARD.findall(server.log())]


def _load(server: Gunicorn, *, until, most_s: float, clients: int = 3) -> list[int]:
    """Requests from `clients` threads until `until()` holds (checked every half second) or
    `most_s` have passed: a boot takes a second on a quiet machine, tens on a busy one."""
    statuses, done = [], threading.Event()

    def client():
        while not done.is_set():
            statuses.append(server.get("/healthz"))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + most_s
    while not until() and time.monotonic() < deadline:
        time.sleep(0.5)
    done.set()
    for thread in threads:
        thread.join()
    return statuses


@pytest.fixture
def guarded(tmp_path):
    """Three workers, all of them over a 1 MB limit from their first request, checked after every
    request, with restarts at least SPACING_S apart."""
    with Gunicorn(
        tmp_path,
        GUNICORN_WORKERS="3",
        GUNICORN_WORKER_MEMORY_LIMIT_MB="1",
        GUNICORN_MEMORY_CHECK_EVERY="1",
        GUNICORN_RESTART_SPACING_S=str(SPACING_S),
        GUNICORN_CMD_ARGS="--graceful-timeout 3",
    ) as server:
        yield server


class TestMemoryGuard:
    def test_workers_over_the_limit_restart_one_at_a_time_spaced_and_no_request_fails(self, guarded):
        statuses = _load(guarded, until=lambda: len(_restarts(guarded)) >= 4, most_s=180)

        restarts = _restarts(guarded)
        assert len(restarts) >= 3, guarded.log()[-3000:]
        gaps = [b - a for (_, a), (_, b) in zip(restarts, restarts[1:], strict=False)]
        assert min(gaps) >= SPACING_S, gaps
        # Each restart is a different process leaving; the arbiter boots one in its place.
        assert len({pid for pid, _ in restarts}) == len(restarts)
        deadline = time.monotonic() + 90  # a boot imports Django: seconds on a busy machine
        while guarded.log().count("Booting worker with pid") < 3 + len(restarts):
            assert time.monotonic() < deadline, guarded.log()[-3000:]
            time.sleep(0.2)
        assert len(statuses) > 50 and set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}


def _conf(**env) -> dict:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return runpy.run_path(str(CONF))
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


class TestTheHookItself:
    """post_request as gunicorn calls it, in this process."""

    def _worker(self):
        return SimpleNamespace(pid=os.getpid(), alive=True, log=SimpleNamespace(info=lambda *a: None))

    def test_under_the_limit_a_worker_stays_however_many_requests(self):
        # The limit sits above this process's own memory (a long test run grows past the default).
        limit = runpy.run_path(str(CONF))["resident_mb"]() + 512
        conf = _conf(GUNICORN_MEMORY_CHECK_EVERY="1", GUNICORN_WORKER_MEMORY_LIMIT_MB=str(limit))
        worker = self._worker()
        for _ in range(1000):
            conf["post_request"](worker, None, {}, None)
        assert worker.alive and worker.requests_served == 1000

    def test_over_it_the_second_worker_waits_for_the_spacing(self):
        conf = _conf(GUNICORN_MEMORY_CHECK_EVERY="10", GUNICORN_WORKER_MEMORY_LIMIT_MB="1")
        first, second = self._worker(), self._worker()
        for _ in range(9):
            conf["post_request"](first, None, {}, None)
        assert first.alive  # checked every 10th request only
        conf["post_request"](first, None, {}, None)
        assert not first.alive
        for _ in range(100):
            conf["post_request"](second, None, {}, None)
        assert second.alive  # 60 s have not passed since the first left

    def test_none_leaves_while_a_successor_boots_whatever_the_spacing(self):
        conf = _conf(
            GUNICORN_MEMORY_CHECK_EVERY="1",
            GUNICORN_WORKER_MEMORY_LIMIT_MB="1",
            GUNICORN_RESTART_SPACING_S="0",
        )
        first, second, successor = self._worker(), self._worker(), self._worker()
        conf["post_request"](first, None, {}, None)
        conf["post_request"](second, None, {}, None)
        assert (first.alive, second.alive) == (False, True)
        conf["post_worker_init"](successor)
        conf["post_request"](second, None, {}, None)
        assert not second.alive


def test_no_recycling_by_request_count():
    conf = _conf()
    assert conf["max_requests"] == 0
    assert conf["WORKER_MEMORY_LIMIT_MB"] == 1024 and conf["RESTART_SPACING_S"] == 60
