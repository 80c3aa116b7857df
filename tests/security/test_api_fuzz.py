"""Schemathesis against the project's own OpenAPI schema, in-process through the WSGI app, as
every role: all checks, KERNELINDEX_FUZZ_EXAMPLES examples per operation and role (100 in CI).

The five roles that hold a token get the same cases: nothing in their generation depends on the
role but the token's value, so each operation's cases are generated once and every case is sent
as each of the five (generation was a third to a half of a role's time). The visitor's cases are
generated on their own, with random credentials: no token of theirs could stand in for those."""

import os

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from rest_framework.throttling import AnonRateThrottle
from schemathesis.config import ProjectConfig
from schemathesis.core.failures import FailureGroup

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


# The roles whose cases are generated together: the first one's token goes into generation.
ROLE_GROUPS = {"visitor": ("visitor",), "token-holders": tuple(role for role in ROLES if role != "visitor")}


@pytest.fixture(params=ROLE_GROUPS)
def role_tokens(request, world) -> dict[str, str | None]:
    """Each role of the group (the fixture's parameter) with its token: None for the visitor."""
    return {role: role_token(world, role) for role in ROLE_GROUPS[request.param]}


@pytest.fixture
def configs_merged_once(monkeypatch):
    """Schemathesis merges an operation's own config (`operations` below) into the project's on
    every call of `phases_for` and `checks_config_for`, several times a case: a sixth of this
    module's CPU (cProfile, 2026-12-07). Nothing changes the config during a test, so each
    (config, operation, phase) is merged once and the merged config is reused."""
    merged = {}
    for name in ("phases_for", "checks_config_for"):
        original = getattr(ProjectConfig, name)

        def once(self, *, operation=None, _original=original, _name=name, **phase):
            key = (_name, id(self), operation.label if operation is not None else None, *phase.values())
            if key not in merged:
                merged[key] = (self, _original(self, operation=operation, **phase))
            return merged[key][1]

        monkeypatch.setattr(ProjectConfig, name, once)


@pytest.fixture
def api_schema(role_tokens, wsgi_app, no_throttles, configs_merged_once):
    """The schema as the app serves it, loaded as the first role of the group."""
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
    token = next(iter(role_tokens.values()))
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
def test_every_operation_as_every_role(case, role_tokens):
    """Each case as every role of the group, all of them even after one fails; the failure names
    the roles it failed as, and its report the case (its curl, with that role's token)."""
    failures = []
    generated_with = next(iter(role_tokens.values()))
    for role, token in role_tokens.items():
        try:
            response = as_role(case, token, generated_with).call_and_validate()  # raises on any failed check
            assert response.status_code < 500, f"{response.status_code} as {role}"
        except (Exception, FailureGroup) as failure:
            failures.append((role, failure))
    if failures:
        role, first = failures[0]
        first.add_note(f"as the role {role!r}; this case failed as: {', '.join(r for r, _ in failures)}")
        raise first


def as_role(case, token: str | None, generated_with: str | None):
    """The generated case with the role's token where generation put the first role's; a case
    that carries none (the visitor's, or one testing a missing credential) goes as it is."""
    sent = case.headers.get("Authorization") if case.headers else None
    if token is None or sent != f"Token {generated_with}":
        return case
    headers = case.headers.copy()
    headers["Authorization"] = f"Token {token}"
    return case.derive(headers=headers, keep_auth=True)
