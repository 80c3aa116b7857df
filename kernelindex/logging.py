"""Structured logs: one JSON object a line, carrying the request id (web) or the task and job id
(Celery), so one request or one rerun job can be followed across web nodes and GPU workers.

Wiring (kernelindex/settings.py): `RequestIdMiddleware` near the top of MIDDLEWARE, and a LOGGING
handler with the `ContextFilter` filter and the `JsonFormatter` formatter (LOG_FORMAT=json, the
default when DEBUG is off). Celery leaves Django's logging alone because this module answers
Celery's `setup_logging` signal.
"""

import contextlib
import contextvars
import inspect
import json
import logging
import re
import uuid
from datetime import UTC, datetime

from celery import signals

REQUEST_ID_HEADER = "X-Request-ID"
JOB_ARGUMENTS = ("job_pk", "job_id")
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_request_id = contextvars.ContextVar("request_id", default="")
_job_id = contextvars.ContextVar("job_id", default="")
# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged too.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "request",  # django.request passes the request object itself; its id is logged instead
    "request_id",
    "task_id",
    "task_name",
    "job_id",
}


class RequestIdMiddleware:
    """Take the proxy's X-Request-ID when it is sane, else make one; log with it, and return it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get(REQUEST_ID_HEADER, "")
        request.request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        # Not reset on the way out: Django logs 4xx/5xx responses after the middleware returns.
        _request_id.set(request.request_id)
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request.request_id
        return response


@contextlib.contextmanager
def job_logging(job_id):
    """Mark every log line inside with this job id (for code that runs a job outside a task
    whose arguments name it)."""
    token = _job_id.set(str(job_id))
    try:
        yield
    finally:
        _job_id.reset(token)


def current_request_id() -> str:
    return _request_id.get()


class ContextFilter(logging.Filter):
    """Puts request_id, task_id, task_name and job_id on every record (blank where unknown)."""

    def filter(self, record):
        request = getattr(record, "request", None)
        record.request_id = getattr(request, "request_id", "") or _request_id.get()
        task = _current_task()
        record.task_id = (getattr(task.request, "id", None) or "") if task else ""
        record.task_name = task.name if task else ""
        record.job_id = _job_id.get() or (_job_id_of(task) if task else "")
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record):
        document = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("request_id", "task_id", "task_name", "job_id"):
            if getattr(record, name, ""):
                document[name] = getattr(record, name)
        document.update(
            {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        )
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, default=str, ensure_ascii=False)


def _current_task():
    from celery._state import get_current_task

    return get_current_task()


def _job_id_of(task) -> str:
    """The job a task works on, from its `job_pk` / `job_id` argument, keyword or positional."""
    request = task.request
    kwargs = getattr(request, "kwargs", None) or {}
    for name in JOB_ARGUMENTS:
        if name in kwargs:
            return str(kwargs[name])
    args = getattr(request, "args", None) or ()
    try:
        parameters = list(inspect.signature(task.run).parameters)
    except (TypeError, ValueError):
        return ""
    for name in JOB_ARGUMENTS:
        if name in parameters and parameters.index(name) < len(args):
            return str(args[parameters.index(name)])
    return ""


@signals.setup_logging.connect
def _keep_django_logging(**kwargs):
    """Answering this signal stops Celery from replacing the handlers LOGGING configured."""
    return None
