"""Throwaway servers that a fault test may stop, kill and restart: a Redis with append-only
persistence (the production shape) and a PostgreSQL cluster of its own, each on its own port of
127.0.0.1 and in a temporary folder. The shared servers on 5432 and 6379 are never touched."""

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def free_port(first: int, span: int = 20) -> int:
    """The first port of `first … first + span` that nothing listens on. Under pytest-xdist each
    worker looks in a range of its own (`first` + 100 × its number), so two workers starting a
    server at the same moment do not both take the same free port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    first += 100 * int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return next(port for port in range(first, first + span) if port_free(port))


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class RedisServer:
    """`redis-server --appendonly yes --appendfsync everysec`, as docs/reliability.md asks for in
    production: a restart keeps every queued message."""

    def __init__(self, folder: Path, port: int):
        self.folder, self.port = Path(folder), port
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        if not port_free(self.port):
            raise AssertionError(f"port {self.port} is taken; a fault test needs it for its own Redis")
        command = [
            shutil.which("redis-server") or "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.folder),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--protected-mode",
            "yes",
        ]
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self.ping, 20, f"Redis on port {self.port}")
        return self

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)

    def ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def stop(self, sig=signal.SIGTERM) -> None:
        """SIGTERM: Redis flushes its append-only file and exits, as a restart does."""
        if self.process is None:
            return
        self.process.send_signal(sig)
        self.process.wait(timeout=30)
        self.process = None

    def restart(self, down_for: float = 1.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()


def postgres_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class PostgresServer:
    """A PostgreSQL cluster of its own (initdb in a temporary folder), started, restarted and
    stopped by the test. initdb refuses root, so the cluster belongs to the `postgres` user
    when the tests run as root."""

    def __init__(self, port: int):
        # Its own folder under /tmp: the `postgres` user cannot enter pytest's root-only one.
        self.folder, self.port = Path(tempfile.mkdtemp(prefix="kernelindex-faults-pg-")), port
        self.data = self.folder / "data"
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @staticmethod
    def available() -> str:
        """Why this machine cannot run one, or ""."""
        if not postgres_bin("initdb") or not postgres_bin("pg_ctl"):
            return "PostgreSQL's initdb and pg_ctl are not installed"
        if os.geteuid() == 0 and not shutil.which("runuser"):
            return "running as root without runuser to start PostgreSQL as another user"
        return ""

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _pg_ctl(self, *args, timeout: float = 60) -> None:
        subprocess.run(
            [*self.as_user, postgres_bin("pg_ctl"), "-D", str(self.data), *args],
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def init(self) -> "PostgresServer":
        if not port_free(self.port):
            raise AssertionError(f"port {self.port} is taken; a fault test needs it for its own PostgreSQL")
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            shutil.chown(self.folder, "postgres")
        subprocess.run(
            [*self.as_user, postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
            + ["-E", "UTF8", "--no-sync"],
            check=True,
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
        return self

    def start(self) -> "PostgresServer":
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-o", options, "-l", str(self.folder / "postgres.log"), "-w", "start")
        return self

    def restart(self) -> None:
        """Fast shutdown (every backend is ended, as in a crash of the clients' sessions), then up."""
        self._pg_ctl("-m", "fast", "-w", "restart")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", "immediate", "-w", "stop")

    def createdb(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
