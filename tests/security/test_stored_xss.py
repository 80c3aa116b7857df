"""Stored XSS: script, event-handler, SVG, `javascript:` URL and Markdown-link payloads in every
user field, looked at everywhere the field is shown: nothing comes out as live markup.

Each payload carries a marker ("xss-…"); a page passes when an HTML parser finds no script with
a payload in it, no on* attribute, no javascript: URL in href/src/action, and when the markers
that page should show are there as text (so the check is not passing on an empty page).
"""

import html
import json
from html.parser import HTMLParser

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.authtoken.models import Token

from attestations import services
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import rerun_request

pytestmark = pytest.mark.django_db

P = {
    "username": '<svg/onload=alert("xss-user")>',
    "text": '<script>alert("xss-text")</script> [md](javascript:alert("xss-md")) <a href="javascript:alert(1)">xss-a</a>',
    "harness": '"><img src=x onerror=alert("xss-harness")>',
    "gpu_product": '<svg onload=alert("xss-gpu")>',
    "driver_version": "<b onmouseover=alert('xss-drv')>",
    "links": [
        "https://example.org/\"onmouseover=\"alert('xss-link')",
        'https://example.org/?<script>alert("xss-link2")</script>',
    ],
    "note": '[click](javascript:alert("xss-note")) <svg><script>alert("xss-note2")</script></svg>',
    "reason": '<script>alert("xss-reason")</script>',
    "description": '<img src=x onerror=alert("xss-report")>',
    "resolution": "<iframe src=\"javascript:alert('xss-resolution')\"></iframe>",
    "job_error": '<script>alert("xss-job")</script>',
    "job_reason": '<body onload=alert("xss-jobreason")>',
}
RAW_PAYLOADS = [value for value in P.values() if isinstance(value, str)] + P["links"]


class LiveMarkup(HTMLParser):
    """Collects what a browser would run: payload scripts, handlers, javascript: URLs."""

    URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found, self._in_script = [], False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") and ("xss" in value or "alert" in value):
                self.found.append(f"<{tag} {name}={value!r}>")
            if name in self.URL_ATTRIBUTES and value.strip().lower().startswith(("javascript:", "data:text")):
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and "xss" in data:
            self.found.append(f"<script>{data[:80]}")


def assert_inert(body: str, *markers: str):
    parser = LiveMarkup()
    parser.feed(body)
    assert parser.found == []
    for payload in RAW_PAYLOADS:
        assert payload not in body
    text = html.unescape(body)
    missing = [marker for marker in markers if marker not in text]
    assert missing == [], f"not shown at all: {missing}"


@pytest.fixture
def hostile(world, django_capture_on_commit_callbacks):
    """Every user field filled with a payload, through the services, and every decision taken."""
    evil = get_user_model().objects.create_user(
        username=P["username"], email="evil@example.org", password="x"
    )  # the signup form would refuse this name; an old or imported account might have it
    EmailAddress.objects.create(user=evil, email=evil.email, verified=True, primary=True)
    moderator, run = world.users["moderator"], world.run
    with django_capture_on_commit_callbacks(execute=True):
        reproduction = services.attestation_submit(
            run=run,
            author=evil,
            kind="reproduction",
            median=run.median,
            p20=run.p20,
            p80=run.p80,
            unit=run.unit,
            gpu_product=P["gpu_product"],
            driver_version=P["driver_version"],
            harness=P["harness"],
            links=P["links"],
            text=P["text"],
        )
        note = services.attestation_submit(run=run, author=evil, kind="note", text=P["note"])
        rejected = services.attestation_submit(run=run, author=evil, kind="note", text=P["text"] + " again")
        services.attestation_approve(attestation=reproduction, moderator=moderator)
        services.attestation_approve(attestation=note, moderator=moderator)
        services.attestation_reject(attestation=rejected, moderator=moderator, reason=P["reason"])
        report = services.issue_report_create(
            run=run, reporter=evil, category="other", description=P["description"]
        )
        services.issue_report_transition(
            report=report, moderator=moderator, to_state="resolved", resolution=P["resolution"]
        )
    RerunJob.objects.update(state=JobState.CANCELLED)
    job = rerun_request(run=run, requested_by=moderator, reason=P["job_reason"])
    RerunJob.objects.filter(pk=job.pk).update(state=JobState.FAILED, error=P["job_error"])
    return {"evil": evil, "reproduction": reproduction, "rejected": rejected, "report": report, "job": job}


SHOWN_ON_A_RUN = ("xss-user", "xss-text", "xss-md", "xss-harness", "xss-gpu", "xss-link", "xss-note")


class TestPublicPages:
    def test_the_run_page(self, client, world, hostile):
        response = client.get(reverse("registry:run-detail", args=[world.run.pk]))
        assert response.status_code == 200
        assert_inert(response.content.decode(), *SHOWN_ON_A_RUN, "xss-job")

    def test_the_runs_attestations_page(self, client, world, hostile):
        response = client.get(reverse("attestations:run-attestations", args=[world.run.pk]))
        assert response.status_code == 200
        assert_inert(response.content.decode(), *SHOWN_ON_A_RUN, "xss-drv", "xss-link2")

    def test_an_attestations_own_page(self, client, hostile):
        response = client.get(reverse("attestations:attestation-detail", args=[hostile["reproduction"].pk]))
        assert response.status_code == 200
        assert_inert(response.content.decode(), "xss-user", "xss-text", "xss-harness", "xss-drv", "xss-link2")

    def test_the_job_pages(self, client, hostile):
        detail = client.get(reverse("jobs:detail", args=[hostile["job"].pk]))
        listing = client.get(reverse("jobs:list"))
        assert (detail.status_code, listing.status_code) == (200, 200)
        assert_inert(detail.content.decode(), "xss-job")
        assert_inert(listing.content.decode())


class TestTheContributorsPages:
    def test_my_submissions(self, client, hostile):
        client.force_login(hostile["evil"])
        response = client.get(reverse("attestations:my-submissions"))
        assert response.status_code == 200
        assert_inert(response.content.decode(), "xss-user", "xss-reason", "xss-resolution")

    def test_the_rejected_attestation_with_its_reason(self, client, hostile):
        client.force_login(hostile["evil"])
        response = client.get(reverse("attestations:attestation-detail", args=[hostile["rejected"].pk]))
        assert response.status_code == 200
        assert_inert(response.content.decode(), "xss-reason", "xss-text")

    def test_the_report_with_its_resolution(self, client, hostile):
        client.force_login(hostile["evil"])
        response = client.get(reverse("attestations:report-detail", args=[hostile["report"].pk]))
        assert response.status_code == 200
        assert_inert(response.content.decode(), "xss-report", "xss-resolution")


class TestTheAdmin:
    @pytest.mark.parametrize(
        "name, markers",
        [
            ("admin:attestations_attestation_changelist", ("xss-user", "xss-gpu")),
            ("admin:attestations_issuereport_changelist", ("xss-user",)),
            ("admin:attestations_auditentry_changelist", ("xss-user", "xss-reason", "xss-resolution")),
            ("admin:reruns_rerunjob_changelist", ()),
        ],
    )
    def test_change_lists(self, client, world, hostile, name, markers):
        client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "x"))
        response = client.get(reverse(name), {"state": "all"} if "auditentry" not in name else {})
        assert response.status_code == 200
        assert_inert(response.content.decode(), *markers)

    def test_change_pages_and_the_decision_page(self, world, hostile):
        client = world.client("moderator")
        pages = [
            (
                reverse("admin:attestations_attestation_change", args=[hostile["reproduction"].pk]),
                "xss-harness",
            ),
            (reverse("admin:attestations_attestation_change", args=[hostile["rejected"].pk]), "xss-reason"),
            (reverse("admin:attestations_issuereport_change", args=[hostile["report"].pk]), "xss-resolution"),
            (
                reverse("admin:attestations_attestation_decide", args=[hostile["reproduction"].pk, "reject"]),
                "Reject",
            ),
        ]
        for url, marker in pages:
            response = client.get(url)
            assert response.status_code == 200, url
            assert_inert(response.content.decode(), marker)


class TestTheApi:
    def test_json_carries_the_text_as_data_never_as_html(self, client, world, hostile):
        urls = [
            reverse("run-attestation-list", args=[world.run.pk]),
            reverse("attestation-detail", args=[hostile["reproduction"].pk]),
            reverse("job-detail", args=[hostile["job"].pk]),
        ]
        for url in urls:
            response = client.get(url, HTTP_ACCEPT="application/json")
            assert response.status_code == 200
            assert response["Content-Type"] == "application/json"
            assert response["X-Content-Type-Options"] == "nosniff"
        listed = json.dumps(client.get(urls[0]).json())
        assert "xss-harness" in listed and "xss-user" in listed

    def test_the_contributors_own_reports_are_json(self, client, hostile):
        token = Token.objects.create(user=hostile["evil"])
        response = client.get(reverse("issue-report-list"), HTTP_AUTHORIZATION=f"Token {token.key}")
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response.json()["results"][0]["resolution"] == P["resolution"]

    def test_the_browsable_api_escapes(self, client, world, hostile):
        response = client.get(reverse("run-attestation-list", args=[world.run.pk]), {"format": "api"})
        assert response.status_code == 200
        assert_inert(response.content.decode(), "xss-harness", "xss-user")


class TestEmails:
    def test_every_notification_is_plain_text_with_a_clean_subject(self, hostile):
        assert len(mail.outbox) >= 4  # to the moderators and to the author, per decision
        for message in mail.outbox:
            assert message.content_subtype == "plain"
            assert getattr(message, "alternatives", []) == []
            assert "\n" not in message.subject and "xss" not in message.subject
        assert any("xss-reason" in m.body for m in mail.outbox)
        assert any("xss-resolution" in m.body for m in mail.outbox)


class TestRefusedAtTheDoor:
    @pytest.mark.parametrize(
        "link",
        [
            "javascript:alert('xss')",
            "JaVaScRiPt:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:x",
        ],
    )
    def test_only_http_links_are_taken(self, world, link):
        with pytest.raises(ValidationError) as error:
            services.attestation_submit(
                run=world.run,
                author=world.users["other"],
                kind="reproduction",
                median=world.run.median,
                p20=world.run.p20,
                p80=world.run.p80,
                unit=world.run.unit,
                gpu_product="GPU",
                links=[link],
            )
        assert "links" in error.value.message_dict

    def test_signup_refuses_a_username_with_markup(self, client):
        response = client.post(
            reverse("account_signup"),
            {
                "email": "new@example.org",
                "username": P["username"],
                "password1": "correct-horse-battery-staple-42",
                "password2": "correct-horse-battery-staple-42",
            },
        )
        assert response.status_code == 200
        assert "username" in response.context["form"].errors
        assert not get_user_model().objects.filter(email="new@example.org").exists()
