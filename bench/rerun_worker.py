"""A Celery worker for benchmark 6 that notes, per job, how long the harness itself took.

    python bench/rerun_worker.py -Q gpu.cpu -c 1 ...   (Celery's worker options; environment from
                                                       bench.common.django_env, plus BENCH_HARNESS_TIMINGS)

The worker is the production one (`celery -A kernelindex worker`) with two functions wrapped before
the pool forks: `registry.reruns.tasks._harness_run` (the whole harness call: plan, child process, the
measurement) and `HarnessSession._start` (starting the child process and importing torch, when the
session is not warm). Each job appends one JSON line to BENCH_HARNESS_TIMINGS. Nothing in the
registry changes; the wrappers only read the clock.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from kernelindex.celery import app  # noqa: E402
from registry.reruns import tasks  # noqa: E402
from registry.reruns.harness import session  # noqa: E402

TIMINGS = Path(os.environ["BENCH_HARNESS_TIMINGS"])
_child_start: list[float] = []
_original_start = session.HarnessSession._start
_original_run = tasks._harness_run


def _timed_start(self, deadline: float) -> None:
    began = time.perf_counter()
    try:
        _original_start(self, deadline)
    finally:
        _child_start.append(time.perf_counter() - began)


def _timed_harness_run(job_id: int, claim) -> dict:
    _child_start.clear()
    began_at, began = time.time(), time.perf_counter()
    result = _original_run(job_id, claim)
    line = {
        "job": job_id,
        "harness_s": time.perf_counter() - began,
        "child_start_s": sum(_child_start),
        "began_at": began_at,
        "status": result.get("status"),
    }
    with TIMINGS.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    return result


session.HarnessSession._start = _timed_start
tasks._harness_run = _timed_harness_run

if __name__ == "__main__":
    app.worker_main(argv=["worker", *sys.argv[1:]])
