"""A pytest plugin that writes, for each test, where it ran and what it cost: the worker, its
start and end, and the CPU seconds of the test's own process and of the child processes it
reaped meanwhile (a server, a Celery worker, chromium, a `manage.py` command). Loaded by
`scripts/suite_timing.py --by-module`, which sums the lines by module; it writes nothing unless
SUITE_CPU_LOG names the file to append to."""

import os
import resource
import time

_started: dict[str, tuple[float, float, float]] = {}
_writes = True  # False in an xdist controller: its workers write their tests' lines


def pytest_configure(config):
    global _writes  # xdist has set `dist` by now where `-n` asked for workers
    _writes = hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no"


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid, location):
    if _writes and os.environ.get("SUITE_CPU_LOG"):
        _started[nodeid] = (time.time(), *_cpu())


def pytest_runtest_logfinish(nodeid, location):
    if nodeid not in _started:
        return
    began, own, children = _started.pop(nodeid)
    own_now, children_now = _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ["SUITE_CPU_LOG"], "a") as handle:
        handle.write(
            f"{worker}\t{began:.2f}\t{time.time():.2f}\t{own_now - own:.2f}\t{children_now - children:.2f}\t{nodeid}\n"
        )
