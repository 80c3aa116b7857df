"""The whole path in real Chromium: sign up, verify with the emailed link (from the file email
backend), file a reproduction, a note and an issue report on the reference record, see them
pending; a moderator decides in the admin; the reproduction appears with the summary, the
report's states reach the reporter, and the evidence level stays "reported"."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from attestations import services
from attestations.models import Attestation, IssueReport
from registry.models import BenchmarkRun
from tests.attestations.conftest import REFERENCE_ID
from tests.browser.conftest import needs_chromium
from tests.conftest import PASSWORD, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def mail_dir(settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    return tmp_path / "mail"


def confirmation_link(mail_dir: Path, address: str) -> str:
    for path in sorted(mail_dir.glob("*.log")):
        text = path.read_text().replace("=\n", "")
        for message in text.split("-" * 79):
            if f"To: {address}" in message:
                match = re.search(r"https?://\S+/accounts/confirm-email/[^/\s]+/", message)
                if match:
                    return match.group(0)
    raise AssertionError(f"no confirmation email to {address} in {mail_dir}")


def test_contributor_to_published_reproduction(live_server, browser, mail_dir, runs, moderators_group):
    run = runs["reference"]
    assert run.external_id == REFERENCE_ID
    moderator = make_user("moderator")
    services.moderator_add(user=moderator)
    public_url = live_server.url + run.get_absolute_url()

    # A visitor follows "Add a reproduction or note", is sent to log in, and signs up instead.
    page = browser.new_context().new_page()
    page.goto(public_url)
    page.get_by_role("link", name="Add a reproduction", exact=True).click()
    assert "/accounts/login/" in page.url
    page.get_by_role("link", name="sign up").click()
    page.fill("#id_email", "newton@example.org")
    page.fill("#id_username", "newton")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.get_by_role("button", name="Sign Up").click()
    page.wait_for_url("**/accounts/confirm-email/")

    # The verification email, read from the file backend.
    page.goto(confirmation_link(mail_dir, "newton@example.org"))
    page.get_by_role("button", name="Confirm").click()
    page.wait_for_load_state()
    if "/accounts/login/" in page.url:
        page.fill("#id_login", "newton")
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Sign In").click()
        page.wait_for_load_state()

    # File a reproduction; it is pending on "My submissions", and invisible to the public.
    page.goto(public_url)
    page.get_by_role("link", name="Add a reproduction", exact=True).click()
    page.wait_for_url(f"**{reverse('attestations:attestation-create', args=[run.pk])}")
    page.check("input[name=kind][value=reproduction]")
    page.fill("#id_median", "145.0")
    page.fill("#id_p20", "144.1")
    page.fill("#id_p80", "146.3")
    assert page.input_value("#id_unit") == "ms"
    page.fill("#id_torch_version", "2.4.0")
    page.fill("#id_links", "https://example.org/geglu-backward.log")
    page.fill("#id_text", "Reran benchmark_geglu.py <b>twice</b>.")
    page.get_by_role("button", name="Submit for moderation").click()
    page.wait_for_url("**/me/submissions/")
    reproduction = Attestation.objects.get(kind="reproduction")
    assert page.text_content(f"#attestation-{reproduction.pk} .state") == "Pending moderation"

    # A note and an issue report, the same way.
    page.goto(live_server.url + reverse("attestations:attestation-create", args=[run.pk]))
    page.check("input[name=kind][value=note]")
    page.fill("#id_text", "The backward timing includes no forward pass.")
    page.get_by_role("button", name="Submit for moderation").click()
    page.wait_for_url("**/me/submissions/")
    page.goto(public_url)
    page.get_by_role("link", name="Report an issue with this run").click()
    page.select_option("#id_category", "wrong_environment")
    page.fill("#id_description", "The driver version is not recorded.")
    page.get_by_role("button", name="Send the report").click()
    page.wait_for_url("**/me/submissions/")
    note = Attestation.objects.get(kind="note")
    report = IssueReport.objects.get()
    assert page.text_content(f"#report-{report.pk} .state") == "Open"

    visitor = browser.new_context().new_page()
    visitor.goto(public_url)
    assert "Reran benchmark_geglu.py" not in visitor.content()
    assert "No approved reproductions or notes yet." in visitor.content()

    # The moderator approves the reproduction in bulk from the queue, the note from its page,
    # and walks the report through acknowledged to resolved.
    admin = browser.new_context().new_page()
    admin.goto(live_server.url + reverse("admin:attestations_attestation_changelist"))
    admin.fill("#id_username", "moderator")
    admin.fill("#id_password", PASSWORD)
    admin.get_by_role("button", name="Log in").click()
    admin.wait_for_url("**/admin/attestations/attestation/")
    admin.check(f"input[name=_selected_action][value='{reproduction.pk}']")
    admin.select_option("select[name=action]", "approve_selected")
    admin.click("button[name=index]")
    admin.fill("textarea[name=reason]", "Agrees with the record.")
    admin.click("input[name=confirm]")
    admin.wait_for_url("**/admin/attestations/attestation/**")
    assert f"Reproduction #{reproduction.pk} on run {run.pk} is now approved." in admin.content()

    admin.goto(live_server.url + reverse("admin:attestations_attestation_change", args=[note.pk]))
    admin.get_by_role("link", name="Approve…").click()
    admin.click("input[name=confirm]")
    admin.wait_for_url(f"**/admin/attestations/attestation/{note.pk}/change/")

    for decision, resolution in (
        ("Acknowledge…", ""),
        ("Resolve…", "Driver 550 added to the environment notes."),
    ):
        admin.goto(live_server.url + reverse("admin:attestations_issuereport_change", args=[report.pk]))
        admin.get_by_role("link", name=decision).click()
        admin.fill("textarea[name=reason]", resolution)
        admin.click("input[name=confirm]")
        admin.wait_for_url(f"**/admin/attestations/issuereport/{report.pk}/change/")
    assert "resolved" in admin.text_content("table.audit-log")

    # Published, with the summary; the report's state reaches the reporter; evidence unchanged.
    visitor.goto(public_url)
    html = visitor.content()
    assert "1 typed reproduction on NVIDIA A100 SXM4 80GB, within ±0.5%" in html
    assert "Reran benchmark_geglu.py &lt;b&gt;twice&lt;/b&gt;." in html
    assert "The backward timing includes no forward pass." in html
    link = visitor.get_by_role("link", name="https://example.org/geglu-backward.log")
    assert link.get_attribute("rel") == "nofollow ugc noopener"
    assert "Attestations never change the evidence level" in html

    page.goto(live_server.url + reverse("attestations:my-submissions"))
    assert page.text_content(f"#report-{report.pk} .state") == "Resolved"
    assert page.text_content(f"#attestation-{reproduction.pk} .state") == "Approved"

    assert BenchmarkRun.objects.get(pk=run.pk).evidence_level == "reported"
    assert (mail_dir.exists() and len(list(mail_dir.glob("*.log")))) >= 2  # verification and notifications
