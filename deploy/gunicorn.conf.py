"""gunicorn settings for KernelIndex's web processes (docs/deploy.md).

Everything here can be overridden on the command line or with GUNICORN_CMD_ARGS.
"""

import json
import math
import multiprocessing
import os
import time

from gunicorn.glogging import Logger, SafeAtoms

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", 2 * multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 60))
graceful_timeout = 30
# No recycling by request count: under sustained load (about 1,400 requests/s on 2 cores) workers
# counting to 100,000 ± 10,000 still reached it within 0.4–1.7 s of each other, every 2–4 minutes,
# and while both booted no request was served for a second (docs/deploy.md, "Worker restarts").
# What recycling guarded against, slow memory growth, is guarded by memory instead: a worker whose
# resident memory passes WORKER_MEMORY_LIMIT_MB finishes its request and exits, and the arbiter
# starts another; one worker of the server at a time (none leaves while the last one's successor
# is still booting) and at least RESTART_SPACING_S apart, so the others keep serving
# (`post_request` and `post_worker_init` below).
max_requests = 0
WORKER_MEMORY_LIMIT_MB = float(os.environ.get("GUNICORN_WORKER_MEMORY_LIMIT_MB", 1024))
RESTART_SPACING_S = float(os.environ.get("GUNICORN_RESTART_SPACING_S", 60))
# Reading /proc/self/statm costs a few microseconds; every 100 requests is plenty for slow growth.
MEMORY_CHECK_EVERY = int(os.environ.get("GUNICORN_MEMORY_CHECK_EVERY", 100))
# When a worker of this server last left for its memory (CLOCK_MONOTONIC, the same in every
# process), and whether its successor is still booting: made here, in the arbiter before it forks,
# so every worker shares them (one lock, the first's).
_last_memory_restart = multiprocessing.Value("d", -math.inf)
_successor_booting = multiprocessing.Value("b", 0, lock=False)
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
# One JSON object a line, like the application's logs; the request id is the one Django returned.
access_log_format = (
    '{"time": "%(t)s", "logger": "gunicorn.access", "request_id": "%({x-request-id}o)s", '
    '"method": "%(m)s", "path": "%(U)s", "status": %(s)s, "bytes": "%(B)s", '
    '"duration_ms": %(M)s, "remote": "%({x-forwarded-for}i)s", "user_agent": "%(a)s"}'
)


class JsonAtoms(SafeAtoms):
    """Every value as the inside of a JSON string: gunicorn's own wrapper escapes only `"`, so a
    path with %0A or %00 (decoded into PATH_INFO) or a backslash in a header split or broke the
    line."""

    def __init__(self, atoms):
        dict.__init__(self)
        for key, value in atoms.items():
            self[key] = json.dumps(value, ensure_ascii=False)[1:-1] if isinstance(value, str) else value


class JsonAccessLogger(Logger):
    atoms_wrapper_class = JsonAtoms


logger_class = JsonAccessLogger


def on_starting(server):
    """Prometheus multiprocess mode: every worker writes its figures under one folder, which
    must start empty (docs/deploy.md)."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            if name.endswith(".db"):
                os.remove(os.path.join(folder, name))


def resident_mb() -> float:
    """This process's resident memory (Linux: /proc/self/statm, in pages)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def post_request(worker, req, environ, resp):
    """The memory guard: past the limit, this worker leaves after this request, unless another
    worker of the server left less than RESTART_SPACING_S ago or that one's successor has not
    booted yet (it asks again later)."""
    worker.requests_served = getattr(worker, "requests_served", 0) + 1
    if worker.requests_served % MEMORY_CHECK_EVERY:
        return
    resident = resident_mb()
    if resident <= WORKER_MEMORY_LIMIT_MB:
        return
    with _last_memory_restart.get_lock():
        now = time.monotonic()
        if _successor_booting.value or now - _last_memory_restart.value < RESTART_SPACING_S:
            return
        _last_memory_restart.value = now
        _successor_booting.value = 1
    worker.log.info(
        "memory guard: worker %s at %.0f MB (limit %.0f MB) restarts after %d requests; t=%.3f",
        worker.pid,
        resident,
        WORKER_MEMORY_LIMIT_MB,
        worker.requests_served,
        now,
    )
    worker.alive = False  # as gunicorn's own max_requests does: finish this request, then exit


def post_worker_init(worker):
    """A worker has loaded the application and is about to serve: any successor has booted."""
    with _last_memory_restart.get_lock():
        _successor_booting.value = 0


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


if os.environ.get("LOG_FORMAT", "json") == "json":
    # gunicorn's own messages (start, worker timeouts) as JSON too; gunicorn replaces these
    # top-level keys of its defaults, so each is given whole.
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "root": {"level": "INFO", "handlers": []},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "access",
                "stream": "ext://sys.stdout",
            },
            "error_console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            },
        },
        "formatters": {
            "access": {"format": "%(message)s"},
            "json": {"()": "kernelindex.logging.JsonFormatter"},
        },
    }
