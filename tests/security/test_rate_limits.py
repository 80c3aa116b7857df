"""Brute force and abuse: allauth's login limits, kept in a real cache and shared by every client;
the admin signs in through that same login; submissions and rerun requests answer 429 with
Retry-After."""

import os

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from registry.reruns.models import JobState, RerunJob
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def login(username: str, password: str, ip: str = "203.0.113.7", path: str | None = None):
    """A fresh browser each time: the limit must hold without any cookie to count on."""
    return Client(REMOTE_ADDR=ip).post(
        path or reverse("account_login"), {"login": username, "password": password}
    )


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


class TestTheCacheIsReal:
    def test_the_default_cache_keeps_what_it_is_given(self):
        assert "DummyCache" not in django_settings.CACHES["default"]["BACKEND"]
        cache.set("rate-limit-probe", 41)
        assert cache.incr("rate-limit-probe") == 42

    @pytest.mark.skipif(
        not os.environ.get("CACHE_URL", "").startswith("redis"), reason="CACHE_URL is not Redis"
    )
    def test_with_cache_url_it_is_redis(self):
        assert "redis" in django_settings.CACHES["default"]["BACKEND"].lower()


class TestFailedLogins:
    def test_five_wrong_passwords_lock_the_account_even_for_the_right_one(self, world):
        for attempt in range(5):
            response = login("owner", f"wrong-{attempt}", ip=f"198.51.100.{attempt}")
            assert response.status_code == 200 and not logged_in(response)
        response = login("owner", PASSWORD, ip="198.51.100.99")
        assert not logged_in(response)
        assert "Too many failed login attempts" in response.content.decode()

    def test_another_account_is_not_locked_by_them(self, world):
        for attempt in range(5):
            login("owner", f"wrong-{attempt}", ip=f"198.51.100.{attempt}")
        assert logged_in(login("other", PASSWORD, ip="198.51.100.50"))

    def test_one_address_trying_many_accounts_is_limited(self, world):
        for attempt in range(10):
            login(f"nobody-{attempt}", "guess", ip="192.0.2.1")
        response = login("other", PASSWORD, ip="192.0.2.1")
        assert not logged_in(response)

    def test_a_good_login_before_the_limit_works(self, world):
        login("owner", "wrong", ip="198.51.100.1")
        assert logged_in(login("owner", PASSWORD, ip="198.51.100.2"))


def admin_login(username: str, password: str, ip: str = "203.0.113.7"):
    client = Client(REMOTE_ADDR=ip)
    return client.post(
        reverse("admin:login") + "?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
    )


class TestTheAdminLogin:
    def test_the_moderator_gets_in(self, world):
        response = admin_login("moderator", PASSWORD)
        assert response.status_code == 302 and response["Location"] == "/admin/"

    def test_five_wrong_passwords_lock_the_admin_login(self, world):
        for attempt in range(5):
            response = admin_login("moderator", f"wrong-{attempt}", ip=f"198.51.100.{attempt}")
            assert response.status_code == 200
        response = admin_login("moderator", PASSWORD, ip="198.51.100.77")
        assert response.status_code == 200
        assert "Too many failed login attempts" in response.content.decode()
        assert "_auth_user_id" not in response.client.session

    def test_the_admin_and_the_site_share_the_count(self, world):
        for attempt in range(3):
            login("moderator", f"wrong-{attempt}", ip=f"198.51.100.{attempt}")
        for attempt in range(2):
            admin_login("moderator", f"wrong-admin-{attempt}", ip=f"198.51.100.{10 + attempt}")
        assert not logged_in(login("moderator", PASSWORD, ip="198.51.100.88"))
        assert admin_login("moderator", PASSWORD, ip="198.51.100.89").status_code == 200

    def test_one_address_guessing_many_staff_names_is_limited(self, world):
        for attempt in range(10):
            admin_login(f"admin-{attempt}", "guess", ip="192.0.2.2")
        response = admin_login("moderator", PASSWORD, ip="192.0.2.2")
        assert response.status_code == 200
        assert "_auth_user_id" not in response.client.session

    def test_a_good_admin_login_gives_its_attempt_back(self, world):
        for _ in range(6):
            assert admin_login("moderator", PASSWORD, ip="198.51.100.5").status_code == 302


class TestSubmissionThrottle:
    def test_the_form_answers_429_with_retry_after(self, world, settings):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "1/h", "ip": ""}
        client = world.client("other")
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        assert client.post(url, {"kind": "note", "text": "First."}).status_code == 302
        response = client.post(url, {"kind": "note", "text": "Second."})
        assert response.status_code == 429
        assert 0 < int(response["Retry-After"]) <= 3600
        assert "Too many submissions" in response.content.decode()
        assert not world.run.attestations.filter(text="Second.").exists()

    def test_the_report_form_too(self, world, settings):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "", "ip": "1/h"}
        client = world.client("other")
        url = reverse("attestations:report-create", args=[world.run.pk])
        assert client.post(url, {"category": "other", "description": "One."}).status_code == 302
        response = client.post(url, {"category": "other", "description": "Two."})
        assert response.status_code == 429
        assert 0 < int(response["Retry-After"]) <= 3600

    def test_the_api_answers_429_with_retry_after(self, world, settings):
        settings.ATTESTATIONS_SUBMISSION_LIMITS = {"user": "1/h", "ip": ""}
        client = Client(HTTP_AUTHORIZATION=f"Token {world.tokens['owner']}")
        body = {"run": world.run.pk, "kind": "note", "text": "API one."}
        assert (
            client.post(reverse("attestation-list"), body, content_type="application/json").status_code == 201
        )
        body["text"] = "API two."
        response = client.post(reverse("attestation-list"), body, content_type="application/json")
        assert response.status_code == 429
        assert 0 < int(response["Retry-After"]) <= 3600


@pytest.fixture
def rerun_moderator(world):
    """The world's moderator: the `moderators` group holds the request_rerun permission."""
    return world.client("moderator")


def request_rerun(client, run):
    return client.post(
        reverse("admin:registry_benchmarkrun_changelist"),
        {"action": "request_rerun", "_selected_action": [run.pk], "apply": "1", "reason": "checking"},
    )


class TestRerunRequestThrottle:
    def test_past_the_limit_a_request_answers_429_and_queues_nothing(self, world, settings, rerun_moderator):
        settings.RERUN_REQUEST_LIMITS = {"user": "2/h"}
        RerunJob.objects.update(state=JobState.CANCELLED)
        assert request_rerun(rerun_moderator, world.run).status_code == 302
        assert request_rerun(rerun_moderator, world.memory_run).status_code == 302
        RerunJob.objects.update(state=JobState.CANCELLED)
        response = request_rerun(rerun_moderator, world.run)
        assert response.status_code == 429
        assert 0 < int(response["Retry-After"]) <= 3600
        assert "Too many rerun and measure requests" in response.content.decode()
        assert RerunJob.objects.filter(state=JobState.QUEUED).count() == 0

    def test_the_measure_form_counts_too(self, world, settings, rerun_moderator):
        settings.RERUN_REQUEST_LIMITS = {"user": "1/h"}
        url = reverse("admin:reruns_rerunjob_measure")
        form = {
            "kernel": world.run.kernel_id,
            "providers": ["huggingface"],
            "operation_modes": ["backward"],
            "metrics": ["latency"],
            "gpu_slug": world.run.environment.slug,
        }
        assert rerun_moderator.post(url, form).status_code == 302
        response = rerun_moderator.post(url, form)
        assert response.status_code == 429
        assert int(response["Retry-After"]) > 0


@pytest.fixture
def one_window(monkeypatch):
    """The API throttle counts in fixed windows of its period (kernelindex/throttling.py): four
    requests that straddle a minute's end are counted in two windows. Hold the clock still."""
    import types

    from kernelindex import throttling

    monkeypatch.setattr(throttling, "time", types.SimpleNamespace(time=lambda: 1_800_000_030.0))


class TestTheClientAddress:
    def test_rotating_x_forwarded_for_does_not_escape_the_login_limit(self, world):
        for attempt in range(10):
            Client(REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_FOR=f"10.0.0.{attempt}").post(
                reverse("account_login"), {"login": f"nobody-{attempt}", "password": "guess"}
            )
        response = Client(REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_FOR="10.0.0.99").post(
            reverse("account_login"), {"login": "other", "password": PASSWORD}
        )
        assert not logged_in(response)

    def test_rotating_x_forwarded_for_does_not_escape_the_api_throttle(self, world, monkeypatch, one_window):
        from rest_framework.throttling import AnonRateThrottle

        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/minute"})
        codes = [
            Client(REMOTE_ADDR="192.0.2.10", HTTP_X_FORWARDED_FOR=f"10.1.0.{n}")
            .get(reverse("run-list"))
            .status_code
            for n in range(4)
        ]
        assert codes == [200, 200, 200, 429]

    def test_behind_one_trusted_proxy_each_client_counts_alone(
        self, world, settings, monkeypatch, one_window
    ):
        from rest_framework.throttling import AnonRateThrottle

        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "1/minute"})
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
        first = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="198.51.100.1")
        second = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="198.51.100.2")
        assert [first.get(reverse("run-list")).status_code for _ in range(2)] == [200, 429]
        response = second.get(reverse("run-list"))
        assert response.status_code == 200
