"""Accounts through django-allauth: sign up, mandatory email verification, log in by email or
username, the site's layout, no GitHub button unless configured."""

import re

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def sign_up(client, username="newton", email="newton@example.org"):
    return client.post(
        reverse("account_signup"),
        {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD},
    )


class TestSignUp:
    def test_sign_up_sends_a_verification_email_and_does_not_log_in(self, client):
        response = sign_up(client)
        assert response.status_code == 302
        assert response["Location"] == reverse("account_email_verification_sent")
        user = get_user_model().objects.get(username="newton")
        assert not EmailAddress.objects.get(user=user).verified
        assert [m.to for m in mail.outbox] == [["newton@example.org"]]
        assert mail.outbox[0].subject.startswith("[KernelIndex] ")
        assert "example.com" not in mail.outbox[0].body
        assert client.get(reverse("attestations:my-submissions")).status_code == 302

    def test_unverified_user_cannot_log_in(self, client):
        sign_up(client)
        client.logout()
        response = client.post(reverse("account_login"), {"login": "newton", "password": PASSWORD})
        assert response.status_code == 302
        assert response["Location"] == reverse("account_email_verification_sent")
        assert "_auth_user_id" not in client.session

    def test_verified_user_logs_in_by_email_or_username(self, client):
        sign_up(client)
        key = re.search(r"/accounts/confirm-email/([^/]+)/", mail.outbox[0].body).group(1)
        response = client.post(reverse("account_confirm_email", args=[key]))
        assert response.status_code == 302
        assert EmailAddress.objects.get(email="newton@example.org").verified
        client.logout()
        for login in ("newton", "newton@example.org"):
            response = client.post(reverse("account_login"), {"login": login, "password": PASSWORD})
            assert response.status_code == 302
            assert client.get(reverse("attestations:my-submissions")).status_code == 200
            client.logout()


class TestPages:
    @pytest.mark.parametrize("name", ["account_login", "account_signup", "account_reset_password"])
    def test_allauth_pages_use_the_site_layout(self, client, name):
        response = client.get(reverse(name))
        assert response.status_code == 200
        body = response.content.decode()
        assert "base.html" in [t.name for t in response.templates]  # the site's own layout
        assert "· KernelIndex</title>" in re.sub(r"\s+", " ", body)
        assert "csrfmiddlewaretoken" in body

    def test_no_github_button_without_its_settings(self, client, settings):
        assert not settings.GITHUB_CLIENT_ID
        assert "github" not in client.get(reverse("account_login")).content.decode().lower()

    def test_login_rate_limits_are_on(self, settings):
        from allauth.account import app_settings

        assert settings.ACCOUNT_RATE_LIMITS == {}
        assert app_settings.RATE_LIMITS["login_failed"]
        assert app_settings.RATE_LIMITS["signup"]

    def test_account_page_links_password_email_and_submissions(self, contributor_client):
        body = contributor_client.get(reverse("attestations:account")).content.decode()
        for name in (
            "account_change_password",
            "account_email",
            "attestations:my-submissions",
            "account_logout",
        ):
            assert f'href="{reverse(name)}"' in body
