"""Structured logs: one JSON object a line, with the request id on the web and the job id in tasks."""

import io
import json
import logging

import pytest
from celery import shared_task
from django.urls import reverse

from kernelindex.logging import ContextFilter, JsonFormatter, job_logging


@pytest.fixture
def json_log():
    """The production handler (context filter + JSON formatter) on the root logger, into a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)

    def lines():
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    yield lines
    root.removeHandler(handler)


@shared_task(name="tests.ops.job_step")
def job_step(job_pk: int, note: str = "") -> None:
    logging.getLogger("tests.ops").info("working on it %s", note)


@pytest.mark.django_db
class TestRequestId:
    def test_a_sane_incoming_request_id_is_kept_logged_and_returned(self, client, json_log):
        response = client.get("/no-such-page/", HTTP_X_REQUEST_ID="edge-7f3a.42")

        assert response.status_code == 404
        assert response["X-Request-ID"] == "edge-7f3a.42"
        line = next(entry for entry in json_log() if entry["logger"] == "django.request")
        assert line["request_id"] == "edge-7f3a.42"
        assert line["level"] == "WARNING" and line["status_code"] == 404
        assert line["message"] == "Not Found: /no-such-page/"

    def test_a_missing_or_hostile_request_id_is_replaced(self, client):
        plain = client.get(reverse("healthz"))
        hostile = client.get(reverse("healthz"), HTTP_X_REQUEST_ID='x"\n{"level":"fake"}')

        assert len(plain["X-Request-ID"]) == 32
        assert len(hostile["X-Request-ID"]) == 32 and hostile["X-Request-ID"] != plain["X-Request-ID"]


class TestJobIdInTaskLogs:
    def test_a_task_names_its_job_from_a_positional_job_pk(self, json_log):
        job_step.apply(args=[42], task_id="task-abc")

        line = next(entry for entry in json_log() if entry["logger"] == "tests.ops")
        assert (line["job_id"], line["task_id"], line["task_name"]) == (
            "42",
            "task-abc",
            "tests.ops.job_step",
        )

    def test_a_task_names_its_job_from_a_keyword_job_pk(self, json_log):
        job_step.apply(kwargs={"job_pk": 7, "note": "x"})

        line = next(entry for entry in json_log() if entry["logger"] == "tests.ops")
        assert line["job_id"] == "7" and line["message"] == "working on it x"

    def test_code_outside_a_task_can_name_its_job(self, json_log):
        with job_logging(99):
            logging.getLogger("tests.ops").warning("outside")
        logging.getLogger("tests.ops").warning("after")

        first, second = [entry for entry in json_log() if entry["logger"] == "tests.ops"]
        assert first["job_id"] == "99" and "job_id" not in second


class TestJsonFormatter:
    def test_each_record_is_one_line_of_json_with_extras_and_the_exception(self, json_log):
        try:
            raise ValueError("bad value")
        except ValueError:
            logging.getLogger("tests.ops").exception("it broke\non two lines", extra={"run_pk": 5})

        (line,) = [entry for entry in json_log() if entry["logger"] == "tests.ops"]
        assert line["message"] == "it broke\non two lines"
        assert line["run_pk"] == 5
        assert "ValueError: bad value" in line["exception"]
        assert line["time"].endswith("+00:00")
