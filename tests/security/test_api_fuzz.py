"""Schemathesis against the project's own OpenAPI schema, in-process through the WSGI app, as
every role: all checks, KERNELINDEX_FUZZ_EXAMPLES examples per operation and role (100 in CI)."""

import os

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from rest_framework.throttling import AnonRateThrottle

from tests.security.conftest import ROLES

# 100 per operation and role in CI (6–8 minutes on two shared cores); 25 by default.
EXAMPLES = int(os.environ.get("KERNELINDEX_FUZZ_EXAMPLES", "100" if os.environ.get("CI") else "25"))
POSITIVE_POST = ["2xx", "400", "401", "403", "404", "409", "429"]
# A list's page past its last one is a 400 naming `page` (one answer for every bad page number,
# kernelindex/pagination.py); the schema cannot state where the last page is.
POSITIVE_LIST = ["2xx", "304", "400", "401", "403", "404"]

pytestmark = pytest.mark.django_db


@pytest.fixture
def wsgi_app():
    """The real WSGI handler, less what Django's test client also leaves out: closing the
    database connection at the end of each request, which would end the test's transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def no_throttles(settings, monkeypatch):
    """The anonymous throttle and the submission limit off (test_rate_limits.py tests them):
    otherwise after a few hundred requests every answer is a 429 and nothing else is fuzzed."""
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": None})
    settings.ATTESTATIONS_SUBMISSION_LIMITS = {}


@pytest.fixture(params=ROLES)
def api_schema(request, world, wsgi_app, no_throttles):
    """The schema as the app serves it, loaded as one role: the fixture's parameter."""
    config = {
        "generation": {"max-examples": EXAMPLES},
        "operations": [
            {
                # A body's content rules are not expressible in OpenAPI (the run must exist and
                # be public, p20 <= median <= p80, the run's own unit, a note carries only
                # text, no duplicate): a schema-valid body may get a 400 naming the field.
                "include-method": "POST",
                "checks": {"positive_data_acceptance": {"expected-statuses": POSITIVE_POST}},
            },
            {
                "include-method": "GET",
                "include-path-regex": "^/api/v1/[a-z]+/$",
                "checks": {"positive_data_acceptance": {"expected-statuses": POSITIVE_LIST}},
            },
        ],
    }
    token = role_token(world, request.param)
    if token:
        # The role's own credential, as the schema's tokenAuth scheme, and no generated one
        # beside it. The visitor keeps the generated ones: random tokens and session cookies,
        # every one of which must be refused.
        config["auth"] = {"openapi": {"tokenAuth": {"api_key": f"Token {token}"}}}
        config["generation"]["with-security-parameters"] = False
    return schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", wsgi_app, config=schemathesis.Config.from_dict(config)
    )


def role_token(world, role: str) -> str | None:
    """The API credential of each role is a token (sessions are the site's)."""
    if role == "visitor":
        return None
    return Token.objects.get_or_create(user=world.users[role])[0].key


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_as_every_role(case):
    response = case.call_and_validate()  # raises on any failed check
    assert response.status_code < 500
