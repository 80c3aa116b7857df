"""HEAD is answered wherever GET is (RFC 9110 §9.3.2: the same status and headers, no body), over
every route of the URL conf: load balancers and link checkers send HEAD, and a 405 there reads as
a dead page. The routes and request paths are the authorization matrix's (tests/security), whose
own test fails when a route of the resolver has no row, so a new route is covered here too."""

import pytest
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections, transaction
from django.test import RequestFactory

from tests.security.authz_matrix import ROWS
from tests.security.conftest import ROLES as MATRIX_ROLES
from tests.security.routes import fill, path_values

pytestmark = pytest.mark.django_db

# An anonymous visitor, a signed-in contributor with a token, and staff (the admin's pages): the
# three ways a request reaches a view. The other roles of the matrix differ only in what the
# views let them see, which the matrix tests for GET.
ROLES = ("visitor", "owner", "moderator")


def _head(client, path: str):
    with transaction.atomic():
        response = client.head(path)
        transaction.set_rollback(True)
    return response


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_every_route_answers_head_with_the_status_of_its_get(world):
    """The matrix's GET codes are the observed ones (test_authorization_matrix.py asserts them)."""
    values = path_values(world)
    clients = {role: world.client(role, raise_request_exception=False) for role in ROLES}
    wrong = []
    for row in ROWS:
        path = fill(row.path if row.path is not None else row.route, values)
        get_codes = dict(zip(MATRIX_ROLES, row.GET.split(), strict=True))
        for role, client in clients.items():
            head = _head(client, path)
            if str(head.status_code) != get_codes[role] or _body(head):
                wrong.append(
                    f"{role} {path}: GET {get_codes[role]}, HEAD {head.status_code} {_body(head)[:40]!r}"
                )
    assert not wrong, "\n".join(wrong)


def test_head_of_a_page_carries_the_headers_of_its_get(client, world):
    path = fill("runs/{run}/", path_values(world))
    get, head = client.get(path), client.head(path)
    assert head.status_code == get.status_code == 200
    assert _body(head) == b""
    assert head["Content-Type"] == get["Content-Type"]
    assert head["Content-Length"] == get["Content-Length"] == str(len(get.content))


def _through_wsgi(method: str, path: str) -> tuple[str, dict, bytes]:
    """The response as Django's WSGI handler hands it to the server (the test client drops a
    HEAD's body itself, so it cannot tell whether the application did)."""
    environ = getattr(RequestFactory(), method.lower())(path).environ
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer["status"], answer["headers"] = status, dict(headers)

    # Keep the test's transaction: no closing of the connection around the request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        body = b"".join(WSGIHandler()(environ, start_response))
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    return answer["status"], answer["headers"], body


def test_the_application_sends_no_body_for_head_a_streamed_export_included(world):
    for path in ("/api/v1/export/runs.csv", fill("runs/{run}/", path_values(world))):
        status, headers, body = _through_wsgi("HEAD", path)
        assert status.startswith("200") and body == b"", path
    get_status, get_headers, get_body = _through_wsgi("GET", "/healthz")
    head_status, head_headers, head_body = _through_wsgi("HEAD", "/healthz")
    assert (head_status, head_body) == (get_status, b"")
    assert head_headers["Content-Length"] == get_headers["Content-Length"] == str(len(get_body))


def test_the_probes_answer_head(client):
    assert client.head("/healthz").status_code == 200
    assert client.head("/readyz").status_code == 200
