"""Real Celery workers for the fault tests: the pipeline tests' worker, with a reconciler beside it
when asked (`celery worker -B`), its pool child found by pid, and its log read for what each
attempt did."""

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.reruns.worker import ROOT, Worker

CLAIMED = re.compile(r"Job (\d+) claimed: attempt lease ([0-9a-f]{32})")
RECORDED = re.compile(r"registry\.job_record\[[^]]+\] succeeded in [0-9.]+s: '([a-z_ ']+)'")


class FaultWorker(Worker):
    """`celery -A kernelindex worker -Q gpu.cpu,default -c 1`, in its own process group; with
    `beat=True` it runs celery beat too, so the reconciler runs every JOB_RECONCILE_INTERVAL."""

    def __init__(self, log_dir: Path, *, beat: bool = False, **env):
        super().__init__(log_dir, **env)
        self.beat = beat

    def start(self, timeout: float = 90) -> "FaultWorker":
        command = [
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
        if self.beat:
            command += ["-B", "-s", str(self.log_path.with_suffix(".beat-schedule"))]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.wait_for(lambda: " ready." in self.log(), timeout, "the worker to be ready")
        return self

    def pool_children(self) -> list[int]:
        """The worker's child processes: the prefork pool's (and beat's, with -B)."""
        out = subprocess.run(
            ["ps", "-o", "pid=,args=", "--ppid", str(self.process.pid)], capture_output=True, text=True
        )
        return [int(line.split()[0]) for line in out.stdout.splitlines() if line.strip()]

    def pool_child(self) -> int:
        """The one pool process that runs tasks (-c 1; ask only of a worker without beat)."""
        children = self.pool_children()
        assert len(children) == 1, f"expected one pool process, found {children}"
        return children[0]

    def claims(self, job_id: int, since: int = 0) -> list[str]:
        """The leases of every attempt this worker claimed for the job."""
        return [lease for job, lease in CLAIMED.findall(self.log(since)) if int(job) == job_id]

    def recorded(self, since: int = 0) -> list[str]:
        """What each job_record task this worker ran answered: a state, or "not this attempt's"."""
        return RECORDED.findall(self.log(since))


def until(condition, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
