"""A real Celery worker process for the pipeline tests, on the test database and real Redis."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings

from tests.processes import database_url

ROOT = Path(__file__).resolve().parent.parent.parent
# Short enough for a test, each still longer than what it bounds: a job here takes about a second
# once torch is imported (the first import can take 20 s on a busy machine).
WORKER_ENV = {
    "JOB_HEARTBEAT_INTERVAL": "0.5",
    "JOB_STALE_AFTER": "3",
    "JOB_HARNESS_TIMEOUT": "60",
    "CELERY_VISIBILITY_TIMEOUT": "90",
    "CELERY_UNACKED_RESTORE_INTERVAL": "1",
    "CELERY_UNACKED_RESTORE_THROTTLE": "1",
    # CPU wall clock on a shared 2-core machine: successive samplings of the same 0.1 ms op gave
    # medians 21% lower to 32% higher than the one before (one rerun once measured 1.9×), each
    # with a bootstrap interval only a few percent wide. These tests check the pipeline, so a
    # rerun agrees when the 95% interval of the difference lies within ±400% here; the verdicts
    # themselves are tested to the digit in test_verdicts.py and tests/harness/test_stats.py, and
    # the far-off run that must disagree is recorded 100,000× faster than any CPU.
    "RERUN_TOLERANCE": "4.0",
    # KernelIndex's loop samples each job for at most this long (the protocol's default is 3 s):
    # a job of the small workload then takes about a second.
    "CONTROLLED_TIMING_BUDGET": "0.3",
}


def broker_is_redis() -> bool:
    return settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://"))


def broker_is_filesystem() -> bool:
    """The embedded broker (kombu's filesystem transport): a folder under KERNELINDEX_VAR_DIR,
    which a worker started from this process's environment shares."""
    return settings.CELERY_BROKER_URL.startswith("filesystem://")


def _broker_messages(queue: str = "") -> list[Path]:
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    folders = {options["data_folder_in"], options["data_folder_out"]}
    return [path for folder in folders for path in Path(folder).glob(f"*.{queue or '*'}.msg")]


def broker_key(name: str) -> str:
    """A broker key as kombu names it in Redis: under this worker's prefix (tests/settings.py
    gives each xdist worker one; none without xdist)."""
    return broker_prefix() + name


def broker_prefix() -> str:
    """This worker's CELERY_BROKER_KEY_PREFIX (tests/settings.py; empty without xdist)."""
    return settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")


def celery_app_for(broker_url: str):
    """A bare Celery app on `broker_url` (a GPU worker's user, a forger), naming its keys as this
    test process's app does."""
    from celery import Celery

    app = Celery(broker=broker_url)
    if broker_prefix():
        app.conf.broker_transport_options = {"global_keyprefix": broker_prefix()}
    return app


def redis_client():
    import redis

    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def broker_clear() -> None:
    """Forget every message a previous test left: queues and kombu's unacked bookkeeping (this
    worker's keys only)."""
    if broker_is_filesystem():
        for path in _broker_messages():
            path.unlink(missing_ok=True)
        return
    client = redis_client()
    keys = [*client.scan_iter(match=broker_key("gpu.*")), *client.scan_iter(match=broker_key("default*"))]
    keys += [
        broker_key(k) for k in ("unacked", "unacked_index", "unacked_mutex") if client.exists(broker_key(k))
    ]
    if keys:
        client.delete(*keys)


def queue_length(name: str) -> int:
    if broker_is_filesystem():
        return len(_broker_messages(name))
    return redis_client().llen(broker_key(name))


class Worker:
    """`celery -A kernelindex worker -Q gpu.cpu,default`, in its own process group so that a test
    can SIGKILL it with its pool and harness processes, as a lost machine would go."""

    def __init__(self, log_dir: Path, **env):
        self.name = f"test-{uuid.uuid4().hex[:8]}"
        self.log_path = log_dir / f"{self.name}.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            **WORKER_ENV,
            **env,
        }
        self.process = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "kernelindex",
            "worker",
            "-Q",
            "gpu.cpu,default",
            "-c",
            "1",
            "--prefetch-multiplier",
            "1",
            "-n",
            f"{self.name}@%h",
            "-l",
            "info",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]

    def start(self, timeout: float = 90) -> "Worker":
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_for(lambda: " ready." in self.log(), timeout, "the worker to be ready")
        return self

    def log(self, since: int = 0) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[since:]

    def mark(self) -> int:
        """Where the log ends now, for `log(since=...)`."""
        return len(self.log())

    def wait_for(self, condition, timeout: float, what: str, interval: float = 0.05):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the worker exited ({self.process.returncode}):\n{self.log()[-4000:]}")
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what}; worker log:\n{self.log()[-4000:]}")

    def kill(self) -> None:
        """SIGKILL the worker, its pool and whatever they started."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        """The test is done with the worker: end it, its pool and whatever they started, at once.
        Celery's warm shutdown of an idle worker on the filesystem broker takes 5-7 s (its
        consumer polls in 2 s rounds, then its pool and timer stop), and no test here waits on
        one: what a worker lost mid-job leaves is what the fault tests kill it to see."""
        if self.process is not None:
            self.kill()
