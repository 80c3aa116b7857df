"""What a newcomer sees (issue 11, "The doorstep"): header links, messages once, a favicon, one
id per anchor on the run page, the moderators' admin links all open, readable admin titles."""

# ruff: noqa: F811 (the fixtures imported from the attestations tests are test arguments)
import re
from collections import Counter

import pytest
from django.urls import reverse

from attestations import services
from attestations.models import Attestation
from tests.attestations.conftest import (  # noqa: F401 (fixtures)
    liger_csv,
    run,
    runs,
    submit_reproduction,
)

pytestmark = pytest.mark.django_db


def test_the_header_links_to_my_submissions_and_the_account_page(contributor_client, run):
    html = contributor_client.get(reverse("registry:kernel-list")).content.decode()

    assert f'href="{reverse("attestations:my-submissions")}"' in html
    assert f'href="{reverse("attestations:account")}"' in html


def test_every_page_names_a_favicon(client, run):
    html = client.get(reverse("registry:home")).content.decode()

    assert re.search(r'<link rel="icon" href="[^"]+favicon.svg"', html)


def test_a_success_message_shows_once(contributor_client, run):
    response = contributor_client.post(
        reverse("attestations:attestation-create", args=[run.pk]),
        {"kind": "note", "text": "The backward pass includes one forward."},
        follow=True,
    )

    html = response.content.decode()
    messages = [str(m) for m in response.context["messages"]]
    assert messages and html.count(messages[0]) == 1


def test_the_run_page_has_no_duplicate_id_and_no_empty_reruns_heading(client, run):
    html = client.get(run.get_absolute_url()).content.decode()

    ids = Counter(re.findall(r'\bid="([^"]+)"', html))
    assert [i for i, n in ids.items() if n > 1] == []
    assert "Controlled reruns</h3>" not in html


def test_confirming_an_email_signs_the_user_in(settings):
    assert settings.ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION is True


def test_no_link_on_the_moderators_admin_index_answers_403(moderator_client, run):
    index = moderator_client.get(reverse("admin:index")).content.decode()
    links = sorted(set(re.findall(r'href="(/admin/[^"#?]*)"', index)) - {reverse("admin:logout")})

    refused = [url for url in links if moderator_client.get(url).status_code == 403]

    assert links and refused == []


def test_a_decision_on_one_attestation_reads_in_the_singular(moderator_client, contributor, run):
    attestation = submit_reproduction(run, contributor)
    url = reverse("admin:attestations_attestation_changelist")

    response = moderator_client.post(
        url, {"action": "approve_selected", "_selected_action": [attestation.pk]}
    )

    assert (
        "Approve: 1 attestation</" in response.content.decode()
        or "Approve: 1 attestation:" in response.content.decode()
    )
    assert Attestation.objects.get(pk=attestation.pk).state == "pending"
    assert services  # the services module is what the admin calls
