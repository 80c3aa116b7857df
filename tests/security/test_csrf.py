"""CSRF: every unsafe request that rides on a session is refused without the token, on every
route (pages, admin, allauth, and the API's session authentication); with the token it gets
through; a foreign Origin or, over HTTPS, a foreign Referer is refused even with the token."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.security.authz_matrix import ROWS
from tests.security.routes import fill, path_values

pytestmark = pytest.mark.django_db

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


def session_client(world, role: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users[role])
    return client


def refused_for_csrf(response) -> bool:
    """403 and saying CSRF: in the body, or in the DRF detail (an HTML-rendered API view such as
    the docs page shows only "403 Forbidden")."""
    said = response.content.decode(errors="replace") + str(getattr(response, "data", ""))
    return response.status_code == 403 and "CSRF" in said


def csrf_token(client: Client) -> str:
    """What a page gives the browser: the token from a form page's cookie."""
    client.get(reverse("attestations:account"))
    return client.cookies["csrftoken"].value


class TestEveryUnsafeRequestNeedsTheToken:
    @pytest.mark.parametrize("role", ["owner", "moderator"])
    def test_every_route_refuses_a_session_request_without_the_token(self, world, role):
        values = path_values(world)
        client = session_client(world, role)
        let_through = []
        for row in ROWS:
            path = fill(row.path if row.path is not None else row.route, values)
            for method in UNSAFE:
                response = getattr(client, method.lower())(path)
                if not refused_for_csrf(response):
                    let_through.append(f"{method} {path}: {response.status_code}")
        assert let_through == []

    def test_a_visitors_login_and_signup_need_it_too(self, world):
        client = Client(enforce_csrf_checks=True)
        for name in ("account_login", "account_signup", "account_reset_password", "admin:login"):
            assert refused_for_csrf(client.post(reverse(name), {"login": "owner", "password": "x"})), name


class TestWithTheTokenTheRequestGetsThrough:
    def test_a_page_form(self, world):
        client = session_client(world, "other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        response = client.post(
            url, {"kind": "note", "text": "Same here.", "csrfmiddlewaretoken": csrf_token(client)}
        )
        assert response.status_code == 302
        assert world.run.attestations.filter(text="Same here.").exists()

    def test_the_api_with_a_session(self, world):
        client = session_client(world, "other")
        response = client.post(
            reverse("attestation-list"),
            {"run": world.run.pk, "kind": "note", "text": "Via the API."},
            content_type="application/json",
            HTTP_X_CSRFTOKEN=csrf_token(client),
        )
        assert response.status_code == 201

    def test_the_api_with_a_token_needs_no_csrf(self, world):
        client = Client(enforce_csrf_checks=True)
        response = client.post(
            reverse("attestation-list"),
            {"run": world.run.pk, "kind": "note", "text": "By token."},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {world.tokens['owner']}",
        )
        assert response.status_code == 201


class TestAForeignOriginIsRefused:
    @pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://testserver.evil.example"])
    def test_a_page_form_with_a_foreign_origin(self, world, origin):
        client = session_client(world, "other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        data = {"kind": "note", "text": "Cross-site.", "csrfmiddlewaretoken": csrf_token(client)}
        response = client.post(url, data, HTTP_ORIGIN=origin)
        assert refused_for_csrf(response)
        assert not world.run.attestations.filter(text="Cross-site.").exists()

    def test_the_api_with_a_session_and_a_foreign_origin(self, world):
        client = session_client(world, "other")
        response = client.post(
            reverse("attestation-list"),
            {"run": world.run.pk, "kind": "note", "text": "Cross-site API."},
            content_type="application/json",
            HTTP_X_CSRFTOKEN=csrf_token(client),
            HTTP_ORIGIN="https://evil.example",
        )
        assert response.status_code == 403
        assert not world.run.attestations.filter(text="Cross-site API.").exists()

    def test_the_sites_own_origin_is_accepted(self, world):
        client = session_client(world, "other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        data = {"kind": "note", "text": "Same-site.", "csrfmiddlewaretoken": csrf_token(client)}
        assert client.post(url, data, HTTP_ORIGIN="http://testserver").status_code == 302

    def test_over_https_a_foreign_referer_is_refused(self, world, settings):
        settings.CSRF_COOKIE_SECURE = False  # the test client keeps the cookie either way
        client = session_client(world, "other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        data = {"kind": "note", "text": "Referer.", "csrfmiddlewaretoken": csrf_token(client)}
        response = client.post(url, data, secure=True, HTTP_REFERER="https://evil.example/page")
        assert refused_for_csrf(response)
        response = client.post(url, data, secure=True)  # no Referer at all, over HTTPS
        assert refused_for_csrf(response)
        assert not world.run.attestations.filter(text="Referer.").exists()
