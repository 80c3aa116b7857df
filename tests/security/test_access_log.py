"""gunicorn's access log (deploy/gunicorn.conf.py) is one JSON object a line, whatever the path."""

import json
import runpy
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn.config import Config

CONF = runpy.run_path(str(Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"))


def access_line(path: str, user_agent: str = "curl/8") -> str:
    logger = CONF["JsonAccessLogger"](Config())
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": path,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_USER_AGENT": user_agent,
    }
    request = SimpleNamespace(headers=[("USER-AGENT", user_agent), ("X-FORWARDED-FOR", "203.0.113.9")])
    response = SimpleNamespace(status="404 Not Found", sent=10, headers=[("X-Request-ID", "abc")])
    atoms = logger.atoms_wrapper_class(logger.atoms(response, request, environ, timedelta(milliseconds=3)))
    return CONF["access_log_format"] % atoms


@pytest.mark.parametrize(
    "path", ["/runs/1/", "/a\nb/", "/a\x00b/", '/a"b\\c/', "/\x1b[31mred/", "/caf\u00e9/"]
)
def test_every_path_gives_one_line_of_valid_json(path):
    line = access_line(path, user_agent='evil\\"\n{')

    assert "\n" not in line
    record = json.loads(line)
    assert record["path"] == path
    assert record["user_agent"] == 'evil\\"\n{'
    assert record["status"] == 404
