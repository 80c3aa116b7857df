"""gunicorn settings for KernelIndex's web processes (docs/deploy.md).

Everything here can be overridden on the command line or with GUNICORN_CMD_ARGS.
"""

import json
import multiprocessing
import os

from gunicorn.glogging import Logger, SafeAtoms

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", 2 * multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 60))
graceful_timeout = 30
# Recycle a worker after about 100,000 requests (jitter: not all at once), a guard against slow
# memory growth. 2,000 restarted each worker every few seconds under load: p99 of a cached page
# 1.3 s against 35 ms (docs/deploy.md, "Worker restarts"; bench/signed_in.py --restarts).
max_requests = 100000
max_requests_jitter = 10000
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
