"""What the fault tests share: the rerun pipeline's small CSV plus a workload slow enough on a
CPU (about 70 ms a call, a few seconds a job) to be interrupted mid-job, markers that skip with
the reason on SQLite and the embedded broker, and `figure()`, which records a measured figure
for docs/reliability.md."""

import json
import os
import time

import pytest
from django.conf import settings
from django.db import connection

from tests.reruns.conftest import row
from tests.reruns.worker import broker_is_redis

# About 70 ms a forward pass on one core: the harness times it for 3 to 5 s once torch is
# imported (the import itself takes 5 to 20 s in a fresh worker on a busy machine).
SLOW_GEGLU = (
    '{"bsz": 2, "hidden_size": 512, "intermediate_size": 1024, '
    '"hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float32"}'
)
# Recorded near what a CPU measures: its rerun is judged on upstream's do_bench figure against
# this p20–p80, and the worker tests' RERUN_TOLERANCE (±400%) holds that interval on a busy
# machine, so a completed rerun agrees and makes the run reproduced.
SLOW_ROW = row("huggingface", "forward", gpu="cpu", y=(70.0, 68.0, 72.0), x=256, config=SLOW_GEGLU)


def small_cpu_rows(count: int) -> list:
    """`count` CPU runs of the small workload, one per sequence length: a job each, ~1 s warm."""
    return [row("huggingface", "forward", gpu="cpu", y=(0.1, 0.09, 0.11), x=16 + 8 * i) for i in range(count)]


needs_redis = pytest.mark.skipif(
    not broker_is_redis(), reason="needs Redis as the Celery broker (CELERY_BROKER_URL=redis://...)"
)


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://...): SQLite has no concurrent writers")


def figure(name: str, value, **detail) -> None:
    """Print a measured figure and keep it in var/reliability-figures.jsonl for the docs."""
    entry = {
        "figure": name,
        "value": value,
        **detail,
        "at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average": round(os.getloadavg()[0], 1),  # the machine's: a fault test's times move with it
    }
    print(f"\nFIGURE {json.dumps(entry)}")
    with (settings.VAR_DIR / "reliability-figures.jsonl").open("a") as out:
        out.write(json.dumps(entry) + "\n")


def levels_seen(levels: list[str]) -> list[str]:
    """The distinct levels in the order they were seen: each change counted once."""
    changes = []
    for level in levels:
        if not changes or changes[-1] != level:
            changes.append(level)
    return changes
