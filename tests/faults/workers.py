"""Real Celery workers for the fault tests: the pipeline tests' worker, with a reconciler beside it
when asked (`celery worker -B`), its pool child found by pid, and its log read for what each
attempt did."""

import functools
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from bench.servers import wait_until
from registry.models import BenchmarkRun
from registry.reruns.models import JobState, RerunJob
from tests.reruns.worker import Worker

CLAIMED = re.compile(r"Job (\d+) claimed: attempt lease ([0-9a-f]{32})")
FINISHED = {JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED}
RECORDED = re.compile(r"registry\.job_report\[[^]]+\] succeeded in [0-9.]+s: '([a-z_ ']+)'")


class FaultWorker(Worker):
    """`celery -A kernelindex worker -Q gpu.cpu,default -c 1`, in its own process group; with
    `beat=True` it runs celery beat too, so the reconciler runs every JOB_RECONCILE_INTERVAL."""

    def __init__(self, log_dir: Path, *, beat: bool = False, **env):
        # The protocol's own 3 s sampling budget, not the pipeline tests' 0.3 s: a fault test
        # interrupts a job while it runs, so a job must run for seconds.
        super().__init__(log_dir, **{"CONTROLLED_TIMING_BUDGET": "3", **env})
        self.beat = beat

    def command(self) -> list[str]:
        command = super().command()
        if self.beat:
            command += ["-B", "-s", str(self.log_path.with_suffix(".beat-schedule"))]
        return command

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


# Polling, as the bench's servers poll: one helper, a slower default interval for job states.
until = functools.partial(wait_until, interval=0.1)


def watch_until_finished(job: RerunJob, run: BenchmarkRun, timeout: float = 150) -> list[str]:
    """Poll the job until it finishes; return every level the run showed meanwhile and after."""
    levels = []

    def done():
        levels.append(BenchmarkRun.objects.values_list("evidence_level", flat=True).get(pk=run.pk))
        job.refresh_from_db()
        return job.state in FINISHED

    until(done, timeout, f"job {job.pk} to finish", interval=0.1)
    levels.append(BenchmarkRun.objects.values_list("evidence_level", flat=True).get(pk=run.pk))
    return levels


def running(job: RerunJob, timeout: float = 90) -> None:
    until(lambda: RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).exists(), timeout, "the claim")


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        if int(stat.read().rsplit(")", 1)[1].split()[1]) == parent:
                            found.append(int(entry))
                            frontier.append(int(entry))
                except (OSError, IndexError, ValueError):
                    continue
    return found


def machine_lost(worker: FaultWorker) -> float:
    """SIGKILL the worker, its pool and its harness (which runs in a session of its own), as a
    lost host would go. Returns when it happened (epoch seconds)."""
    harness = descendants(worker.process.pid)
    killed_at = time.time()
    worker.kill()
    for pid in harness:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return killed_at
