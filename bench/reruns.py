"""Benchmark 6, the Django side: the rerun pipeline on real Celery workers, Redis and PostgreSQL.

Run by bench/task.py in a child process whose environment is production's (bench.common.django_env)
with a real broker (CELERY_TASK_ALWAYS_EAGER off). Two workers, as deploy/Procfile runs them: one
on `gpu.cpu` (-c 1, prefetch 1; bench/rerun_worker.py, which notes the harness's own time per job)
and one on `default`, which records results. The CPU harness runs upstream Liger's GEGLU setup on
workloads small enough to take about a second each.

For every job: request (`created_at`, the request's transaction) → claim (`started_at`) → harness
→ a signed `job_report` on the default queue → recorded (`finished_at`). Overhead = request → recorded minus
the harness call (`_harness_run`: planning, the child process, the measurement).
"""

import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings

from registry.models import Kernel, Workload
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import measure_request, worker_key_register
from registry.reruns.services.signing import private_key_generate
from registry.sources.liger.importer import COLUMNS
from registry.sources.liger.services import liger_import

ROOT = Path(__file__).resolve().parent.parent
FINISHED = {JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED, JobState.CANCELLED}
CONFIG = (
    '{"bsz": 2, "hidden_size": 64, "intermediate_size": 128, '
    '"hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float32"}'
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def workloads_import(n: int, folder: Path) -> list[Workload]:
    """One GEGLU kernel with `n` small workloads (sequence lengths 16, 24, ...), an H200 run each."""
    path = folder / "geglu.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for i in range(n):
            x = 16 + 8 * i
            writer.writerow(
                ["geglu", "huggingface", "forward", "speed", "ms", "T", "sequence length", str(x), "1.0", "0.98",
                 "1.02", CONFIG, "NVIDIA H200", "2025-01-02 03:04:05", "0.8.4"]
            )  # fmt: skip
    liger_import(path=path)
    return list(Workload.objects.filter(kernel__slug="geglu").order_by("pk"))


class Workers:
    """The GPU worker (timed harness) and the default-queue worker, in their own process groups."""

    def __init__(self, folder: Path, *, warm: bool):
        self.folder, self.warm = folder, warm
        self.timings = folder / f"harness-{uuid.uuid4().hex[:6]}.jsonl"
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def __enter__(self) -> "Workers":
        env = {**os.environ, "BENCH_HARNESS_TIMINGS": str(self.timings)}
        env["KERNELINDEX_HARNESS_WARM"] = "1" if self.warm else "0"
        env["WORKER_NAME"], env["WORKER_KEY_FILE"] = worker_key_make(self.folder)
        common = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
        for queue in ("gpu.cpu", settings.CELERY_TASK_DEFAULT_QUEUE):
            name = f"bench-{queue.replace('.', '-')}-{uuid.uuid4().hex[:6]}"
            log_path = self.folder / f"{name}.log"
            argv = ["-Q", queue, "-c", "1", "--prefetch-multiplier", "1", "-n", f"{name}@%h", *common]
            with log_path.open("ab") as out:
                process = subprocess.Popen(
                    [sys.executable, str(ROOT / "bench" / "rerun_worker.py"), *argv],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.processes.append((process, log_path))
        deadline = time.monotonic() + 120
        while not all(" ready." in path.read_text(errors="replace") for _, path in self.processes):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in self.processes):
                raise SystemExit("a benchmark worker did not start:\n" + self.logs())
            time.sleep(0.2)
        return self

    def __exit__(self, *exc) -> None:
        for process, _ in self.processes:
            process.terminate()
        for process, _ in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace")[-3000:] for _, path in self.processes)

    def harness(self) -> dict[int, dict]:
        if not self.timings.exists():
            return {}
        lines = self.timings.read_text().splitlines()
        return {row["job"]: row for row in map(json.loads, lines)}


def worker_key_make(folder: Path) -> tuple[str, str]:
    """A worker key for the benchmark's CPU worker, registered as an operator would (its claims and
    results are signed reports: docs/deploy.md, "GPU workers")."""
    name = f"bench-cpu-{uuid.uuid4().hex[:6]}"
    pem, public = private_key_generate()
    path = folder / f"{name}.key"
    path.write_bytes(pem)
    path.chmod(0o600)
    worker_key_register(name=name, gpu_slug="cpu", public_key=public, cards=[])
    return name, str(path)


def broker_clear() -> None:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    keys = [*client.scan_iter(match="gpu.*"), *client.scan_iter(match="default*")]
    keys += [k for k in ("unacked", "unacked_index", "unacked_mutex") if client.exists(k)]
    if keys:
        client.delete(*keys)


def jobs_request(kernel: Kernel, workloads: list[Workload]) -> list[int]:
    created = measure_request(
        kernel=kernel,
        providers=["huggingface"],
        operation_modes=["forward"],
        metrics=["latency"],
        workloads=workloads,
        gpu_slug="cpu",
    ).created
    return [job.pk for job in created]


def jobs_wait(pks: list[int], workers: Workers, timeout: float = 600) -> list[RerunJob]:
    deadline = time.monotonic() + timeout
    while RerunJob.objects.filter(pk__in=pks).exclude(state__in=FINISHED).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {pks} did not finish:\n" + workers.logs())
        time.sleep(0.05)
    return list(RerunJob.objects.filter(pk__in=pks).order_by("pk"))


def job_row(job: RerunJob, harness: dict) -> dict:
    total = (job.finished_at - job.created_at).total_seconds()
    own = harness.get(job.pk, {})
    return {
        "job": job.pk,
        "state": job.state,
        "request_to_recorded_s": total,
        "request_to_claim_s": (job.started_at - job.created_at).total_seconds(),
        "claim_to_recorded_s": (job.finished_at - job.started_at).total_seconds(),
        "harness_s": own.get("harness_s"),
        "child_start_s": own.get("child_start_s"),
        "overhead_s": total - own["harness_s"] if own else None,
    }


def scenario(kernel: Kernel, workloads: list[Workload], folder: Path, *, warm: bool, batch: bool) -> dict:
    """One worker pair; a first job not counted (the worker's own first-task work: asking torch
    for the GPU model); then the workloads one job at a time (each waited for), or all at once."""
    broker_clear()
    with Workers(folder, warm=warm) as workers:
        jobs_wait(jobs_request(kernel, workloads[:1]), workers)
        started = time.perf_counter()
        if batch:
            jobs = jobs_wait(jobs_request(kernel, workloads), workers)
        else:
            jobs = [job for w in workloads for job in jobs_wait(jobs_request(kernel, [w]), workers)]
        wall = time.perf_counter() - started
        harness = workers.harness()
    rows = [job_row(job, harness) for job in jobs]
    bad = [r for r in rows if r["state"] != JobState.SUCCEEDED or r["harness_s"] is None]
    if bad:
        raise SystemExit(f"jobs did not succeed: {bad}\n" + workers.logs())
    makespan = (max(j.finished_at for j in jobs) - min(j.created_at for j in jobs)).total_seconds()
    harness_sum = sum(r["harness_s"] for r in rows)
    summary = {
        "warm": warm,
        "batch": batch,
        "jobs": len(rows),
        "wall_s": wall,
        "request_to_last_recorded_s": makespan,
        "harness_total_s": harness_sum,
        # A batch: what the pipeline adds to the batch's span. One at a time: each job's own
        # overhead (the span would also count this script's pauses between requests).
        "overhead_per_job_s": (makespan - harness_sum) / len(rows)
        if batch
        else statistics.mean(r["overhead_s"] for r in rows),
        "median_queue_s": statistics.median(r["request_to_claim_s"] for r in rows),
        "median_overhead_s": statistics.median(r["overhead_s"] for r in rows),
        "max_overhead_s": max(r["overhead_s"] for r in rows),
        "median_harness_s": statistics.median(r["harness_s"] for r in rows),
        "median_child_start_s": statistics.median(r["child_start_s"] for r in rows),
        "worker_s_per_workload": statistics.median(r["claim_to_recorded_s"] for r in rows),
        "rows": rows,
    }
    log(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    return summary


def measure(n: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="ki_perf2_reruns_"))
    workloads = workloads_import(n, folder)
    kernel = Kernel.objects.get(slug="geglu")
    results = [
        scenario(kernel, workloads, folder, warm=True, batch=False),
        scenario(kernel, workloads, folder, warm=True, batch=True),
        scenario(kernel, workloads, folder, warm=False, batch=True),
    ]
    broker_clear()
    return {"scenarios": results, "logs": str(folder)}
