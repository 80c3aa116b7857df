"""A sweep's workers when it ends: an idle fleet (every job it sent recorded) is ended at once,
its workers' own children with them; a fleet with a job still out gets Celery's warm shutdown."""

import os
import signal
import sys
import time
from pathlib import Path

from registry.reruns.sweep.workers import Fleet

# A stand-in for a Celery worker and its pool: a process that starts a child, writes the child's
# pid, and ignores SIGTERM for a while, as a worker finishing its job would.
WORKER = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.5), sys.exit(0)))
time.sleep(60)
"""


def started(tmp_path: Path) -> tuple[Fleet, int]:
    fleet = Fleet.__new__(Fleet)
    fleet.processes, fleet.logs = [], []
    log = tmp_path / "worker.log"
    fleet._start([sys.executable, "-c", WORKER], dict(os.environ), tmp_path, log)
    deadline = time.monotonic() + 30
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    return fleet, int(log.read_text().split()[0])


def gone(pid: int, within_s: float = 5) -> bool:
    """Whether `pid` has ended (reaped, or a zombie left to init) within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_an_idle_fleet_ends_at_once_with_its_workers_children(tmp_path):
    fleet, child = started(tmp_path)
    began = time.monotonic()
    fleet.stop(idle=True)
    assert time.monotonic() - began < 1.0  # no warm shutdown waited for
    assert fleet.processes[0].returncode == -signal.SIGKILL
    assert gone(child)


def test_a_fleet_with_a_job_out_gets_a_warm_shutdown(tmp_path):
    fleet, child = started(tmp_path)
    began = time.monotonic()
    fleet.stop(grace_s=20)
    assert time.monotonic() - began >= 1.4  # it waited for the worker to finish
    assert fleet.processes[0].returncode == 0
    os.kill(child, signal.SIGKILL)  # the stand-in leaves its child; a Celery worker's pool does not
