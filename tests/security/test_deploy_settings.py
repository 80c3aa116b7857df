"""Production settings pass Django's deployment checks; every HTML response carries the headers."""

import secrets
import subprocess

import pytest
from django.test import override_settings
from django.urls import reverse

from tests.processes import child_env, manage


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
