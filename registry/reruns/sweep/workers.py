"""The sweep's workers (a `Fleet`): one Celery worker per GPU on the model's queue and one recorder
on the default queue, started from this process's environment with the sweep's own time limit."""

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from registry.reruns.harness import local_gpus
from registry.reruns.models import WorkerKey
from registry.reruns.services import signing, worker_key_register

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# The sweep's own time limit for one harness run (its workers' JOB_HARNESS_TIMEOUT): the slowest
# jobs of the shipped sweeps, fused_moe's on a cold Triton cache (compiling and autotuning each
# shape), took 235 s; every other kernel's under 90 s. A job that hangs is killed at this limit
# and its card goes on with the next; it is reported, not tried again in the same sweep (the
# sweep on GPU-dc082f35, 2026-12-03, lost half its GPU time to one multi_token_attention job that never returned,
# under the site's 1,800 s limit).
JOB_TIMEOUT_S = 360
LOG_TAIL = 3000  # characters of a worker's log that the sweep shows when the worker exits
VISIBILITY_MARGIN_S = 240  # the task's hard limit is JOB_HARNESS_TIMEOUT + 180 s (tasks.py)


def _time_limits(job_timeout_s: float) -> dict:
    """The fleet's settings for the sweep's limit: JOB_HARNESS_TIMEOUT, and a broker visibility
    timeout that outlasts it with the task's hard limit (+180 s), raised where the environment's
    is shorter, never lowered (the settings refuse to start a worker whose visibility timeout a
    job could outlast; a shorter one only brings a lost message back sooner)."""
    configured = os.environ.get("CELERY_VISIBILITY_TIMEOUT") or settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(
        "visibility_timeout", 0
    )
    visibility = max(int(float(configured or 0)), int(job_timeout_s) + VISIBILITY_MARGIN_S)
    return {"JOB_HARNESS_TIMEOUT": str(job_timeout_s), "CELERY_VISIBILITY_TIMEOUT": str(visibility)}


def worker_identity(*, gpu_slug: str, gpus: int, folder: Path) -> dict:
    """The environment naming the fleet's GPU workers and their key: none where this process's
    environment names them (WORKER_NAME, WORKER_KEY_FILE); else the sweep's own key in `folder`,
    reused while it is still registered as it was made (`_reusable_key`), or a new one made there
    and registered for this GPU model and the host's cards (the sweep runs the whole pipeline on
    its host, so it stands where the operator running `manage.py worker_key` would;
    docs/deploy.md). Without it a worker refuses to start: it has nothing to sign its reports with."""
    if settings.WORKER_NAME and settings.WORKER_KEY_FILE:
        return {}
    cards = [] if gpu_slug == "cpu" else [uuid for _, uuid in local_gpus()[:gpus] if uuid]
    for key in sorted(folder.glob(f"sweep-{gpu_slug}-*.key")):
        if _reusable_key(key, gpu_slug=gpu_slug, cards=cards):
            return {"WORKER_NAME": key.stem, "WORKER_KEY_FILE": str(key)}
    name = f"sweep-{gpu_slug}-{secrets.token_hex(4)}"
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / f"{name}.key"
    pem, public = signing.private_key_generate()
    with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
        handle.write(pem)
    worker_key_register(
        name=name, gpu_slug=gpu_slug, public_key=public, cards=cards, note="controlled_sweep's own workers"
    )
    return {"WORKER_NAME": name, "WORKER_KEY_FILE": str(key)}


def _reusable_key(path: Path, *, gpu_slug: str, cards: list[str]) -> bool:
    """Whether a key file an earlier sweep made can sign for this one: it holds an Ed25519 key,
    whose public half is registered under the file's name for this GPU model, unrevoked, with
    every card this sweep uses (a sweep on more cards than before registers a new key)."""
    registered = WorkerKey.objects.filter(name=path.stem, gpu_slug=gpu_slug, revoked_at__isnull=True).first()
    if registered is None or not set(cards) <= set(registered.cards):
        return False
    if signing.private_key_problem(path):
        return False
    return signing.public_key_text(signing.private_key_load(path)) == registered.public_key


class Fleet:
    """One Celery worker per GPU (CUDA_VISIBLE_DEVICES), all consuming the model's queue, and
    one CPU worker on the default queue that records results."""

    def __init__(self, *, gpu_slug: str, gpus: int, log_dir: Path, job_timeout_s: float = JOB_TIMEOUT_S):
        self.processes, self.logs = [], []
        base = [sys.executable, "-m", "celery", "-A", "kernelindex", "worker", "--prefetch-multiplier", "1"]
        root = Path(settings.BASE_DIR)
        common = {**os.environ, **MULTICAST_OFF, **_time_limits(job_timeout_s)}
        common.update(worker_identity(gpu_slug=gpu_slug, gpus=gpus, folder=Path(settings.VAR_DIR) / "keys"))
        for index in range(gpus):
            env = dict(common)
            if gpu_slug != "cpu":
                env["CUDA_VISIBLE_DEVICES"] = str(index)
            command = [*base, "-Q", f"gpu.{gpu_slug}", "-c", "1", "-n", f"gpu{index}@%h", "-l", "info"]
            self._start(command, env, root, log_dir / f"worker-gpu{index}.log")
        command = [
            *base,
            "-Q",
            settings.CELERY_TASK_DEFAULT_QUEUE,
            "-c",
            "2",
            "-n",
            "recorder@%h",
            "-l",
            "info",
        ]
        self._start(command, common, root, log_dir / "worker-recorder.log")

    def _start(self, command, env, root, log: Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        self.processes.append(
            subprocess.Popen(
                command,
                cwd=root,
                env=env,
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its pool's children in its group: stop(idle=True) ends them all
            )
        )
        self.logs.append(log)

    def exited(self) -> str:
        """'' while every worker runs; else which one exited, with the end of its log."""
        for process, log in zip(self.processes, self.logs, strict=True):
            code = process.poll()
            if code is not None:
                tail = log.read_text(errors="replace")[-LOG_TAIL:]
                return f"the worker logging to {log.name} exited with status {code}; its log ends:\n{tail}"
        return ""

    def stop(self, grace_s: float = 20, *, idle: bool = False) -> None:
        """Warm shutdown: a running job may finish within `grace_s`. `idle`: every job the sweep
        sent is recorded, so nothing is lost by ending the workers and their pools at once;
        Celery's warm shutdown of an idle worker on the filesystem broker takes 5-7 s (its
        consumer polls in 2 s rounds, then its pool and timer stop; docs/performance.md)."""
        if idle:
            for process in self.processes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            for process in self.processes:
                process.wait()
            return
        for process in self.processes:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()  # a job cut short is cancelled by the sweep and measured next time
                process.wait()
