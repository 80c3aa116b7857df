"""Production settings pass Django's deployment checks; every HTML response carries the headers."""

import json
import re
import secrets
import subprocess
import sys

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from tests.conftest import PASSWORD
from tests.processes import ROOT, child_env, manage
from tests.security.authz_matrix import ROWS
from tests.security.routes import fill, path_values


def production_env(**extra):
    env = child_env(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="kernelindex.example.org")
    env.update(extra)
    return env


class TestDeploymentChecks:
    def test_check_deploy_passes_at_warning_level(self):
        result = subprocess.run(
            manage("check", "--deploy", "--fail-level", "WARNING"),
            env=production_env(),
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def test_production_refuses_to_start_without_a_secret_key(self):
        env = production_env(SECRET_KEY="")
        result = subprocess.run(manage("check"), env=env, capture_output=True, text=True)
        assert result.returncode != 0
        assert "SECRET_KEY is required when DEBUG is off" in result.stderr

    def test_a_malformed_setting_names_its_variable(self):
        result = subprocess.run(
            manage("check"), env=production_env(CONN_MAX_AGE="forever"), capture_output=True, text=True
        )
        assert result.returncode != 0
        assert "Environment variable CONN_MAX_AGE is invalid" in result.stderr


@pytest.mark.django_db
class TestSecurityHeaders:
    @override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True)
    def test_html_pages_carry_the_security_headers(self, client):
        response = client.get(reverse("registry:home"), secure=True)
        assert response.status_code == 200
        csp = response["Content-Security-Policy"]
        for directive in (
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            "default-src 'self'",
        ):
            assert directive in csp
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["X-Frame-Options"] == "DENY"
        assert response["Strict-Transport-Security"].startswith("max-age=31536000")

    def test_session_and_csrf_cookies_are_http_only(self, settings):
        assert settings.SESSION_COOKIE_HTTPONLY and settings.CSRF_COOKIE_HTTPONLY


def production_settings(*names: str) -> dict:
    """The values production settings (DEBUG off, a real secret) give these names."""
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {list(names)!r}}}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=production_env(), capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


COOKIE_SETTINGS = (
    "SESSION_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE",
    "CSRF_COOKIE_SECURE",
    "CSRF_COOKIE_HTTPONLY",
    "CSRF_COOKIE_SAMESITE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_PROXY_SSL_HEADER",
)
CSP_DIRECTIVES = ("default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'")


@pytest.fixture(scope="module")
def production():
    return production_settings(*COOKIE_SETTINGS)


def assert_security_headers(response, where: str):
    csp = response.get("Content-Security-Policy", "")
    missing = [d for d in CSP_DIRECTIVES if d not in csp]
    assert missing == [], f"{where}: CSP lacks {missing}"
    assert response.get("X-Content-Type-Options") == "nosniff", where
    assert response.get("Referrer-Policy") == "same-origin", where
    assert response.get("X-Frame-Options") == "DENY", where
    assert response.get("Strict-Transport-Security", "").startswith("max-age=31536000"), where
    assert "includeSubDomains" in response["Strict-Transport-Security"], where


class TestProductionCookies:
    def test_production_settings_make_cookies_secure_and_http_only(self, production):
        assert production["SESSION_COOKIE_SECURE"] and production["CSRF_COOKIE_SECURE"]
        assert production["SESSION_COOKIE_HTTPONLY"] and production["CSRF_COOKIE_HTTPONLY"]
        assert production["SESSION_COOKIE_SAMESITE"] == production["CSRF_COOKIE_SAMESITE"] == "Lax"
        assert production["SECURE_SSL_REDIRECT"] and production["SECURE_HSTS_SECONDS"] >= 31536000

    @pytest.mark.django_db
    def test_a_login_sets_them_so(self, production, world):
        with override_settings(
            **{k: production[k] for k in COOKIE_SETTINGS if k != "SECURE_PROXY_SSL_HEADER"}
        ):
            client = Client()
            client.get(reverse("account_login"), secure=True)  # the CSRF cookie
            token = client.cookies["csrftoken"].value
            response = client.post(
                reverse("account_login"),
                {"login": "owner", "password": PASSWORD, "csrfmiddlewaretoken": token},
                secure=True,
                HTTP_REFERER="https://testserver/accounts/login/",
            )
        assert response.status_code == 302
        for name in ("sessionid", "csrftoken"):
            cookie = response.cookies[name]
            assert cookie["secure"] is True and cookie["httponly"] is True, name
            assert cookie["samesite"] == "Lax", name


@pytest.mark.django_db
class TestEveryHtmlResponseCarriesTheHeaders:
    @override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True)
    @pytest.mark.parametrize("role", ["visitor", "owner", "moderator"])
    def test_every_route_answered_in_html(self, world, role):
        """Every route of the matrix, GET, over HTTPS: whatever HTML comes back (pages, the
        admin, allauth, redirects, 403 and 404 pages) has the headers."""
        values = path_values(world)
        client = world.client(role)
        html_responses = 0
        for row in ROWS:
            response = client.get(fill(row.path if row.path is not None else row.route, values), secure=True)
            if response.get("Content-Type", "").startswith("text/html"):
                html_responses += 1
                assert_security_headers(response, f"{row.route} ({response.status_code})")
        assert html_responses > 100

    @override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True)
    def test_an_unknown_page_too(self, client):
        response = client.get("/no-such-page/", secure=True)
        assert response.status_code == 404
        assert_security_headers(response, "404")


@pytest.mark.django_db
class TestPagesNeedNothingTheCspBlocks:
    def test_public_pages_have_no_inline_script_or_handler(self, world):
        """script-src 'self': an inline script or on* handler would be blocked, so none is used."""
        values = path_values(world)
        client = world.client("visitor")
        offenders = []
        for row in ROWS:
            if row.route.startswith(("admin/", "api/")) or row.GET.split()[0] != "200":
                continue
            response = client.get(fill(row.path if row.path is not None else row.route, values))
            if not response.get("Content-Type", "").startswith("text/html"):
                continue
            body = response.content.decode()
            if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", body) or re.search(r"<[^>]+\son[a-z]+\s*=", body):
                offenders.append(row.route)
        assert offenders == []
