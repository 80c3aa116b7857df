"""The PostgreSQL backend's health check (kernelindex/postgresql/base.py): a healthy idle
connection is taken as usable without a round trip; one the server ended is not."""

import time

import pytest
from django.db import connection, connections
from django.db.backends.postgresql import base as django_postgresql

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's backend"),
]


@pytest.fixture
def other():
    """A second connection to the test database, as another request's would be."""
    wrapper = connections.create_connection("default")
    wrapper.ensure_connection()
    yield wrapper
    wrapper.close()


def test_the_engine_is_the_projects_own():
    assert connection.settings_dict["ENGINE"] == "kernelindex.postgresql"


def test_a_healthy_idle_connection_is_usable_without_a_query(other, monkeypatch):
    monkeypatch.setattr(
        django_postgresql.DatabaseWrapper, "is_usable", lambda self: pytest.fail("asked the server")
    )
    assert other.is_usable()


def test_a_connection_the_server_ended_is_not_usable(other):
    with other.connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while other.is_usable() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not other.is_usable()
