"""A message shows once on /me/, the signed-in user's page, after every action that ends there:
signing in from /me/ (allauth's login with next=/me/), creating the API token and replacing it.

Messages are rendered in one place, the `messages` personal region of base.html
(templates/personal/messages.html). A second template iterating `messages` (a page's own copy, or
allauth's layout, which renders them too unless the site's templates/allauth/layouts/base.html
replaces it) would show each one twice; the page cache's personalisation renders that region again
for a signed-in visitor, so both paths are checked, with the page cache on and off, and in Chromium.
"""

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from tests.browser.conftest import needs_chromium
from tests.conftest import PASSWORD, make_user

BANNER = re.compile(r'<p class="banner">([^<]*)</p>')
TEMPLATES = Path(django_settings.BASE_DIR) / "templates"
MESSAGES_REGION = TEMPLATES / "personal" / "messages.html"


def sign_in_from_me(client) -> str:
    to_login = client.get(reverse("attestations:account"))
    assert to_login.status_code == 302 and "next=/me/" in to_login["Location"]
    return client.post(to_login["Location"], {"login": "newton", "password": PASSWORD}, follow=True)


def regenerate_token(client):
    return client.post(reverse("attestations:api-token-regenerate"), follow=True)


ACTIONS = [
    ("sign in from /me/", sign_in_from_me, "Successfully signed in as newton."),
    ("create the API token", regenerate_token, "Your API token was created; it is shown below."),
    ("replace the API token", regenerate_token, "A new API token was created; the old one no longer works."),
]


@pytest.mark.django_db
@pytest.mark.parametrize("page_cache_seconds", [0, 3600], ids=["page cache off", "page cache on"])
def test_each_message_shows_once_on_me_after_each_action(client, settings, page_cache_seconds):
    settings.PAGE_CACHE_SECONDS = page_cache_seconds
    make_user("newton")
    for name, action, message in ACTIONS:
        response = action(client)
        assert response.status_code == 200, name
        assert response.redirect_chain[-1][0] == reverse("attestations:account"), name
        assert BANNER.findall(response.content.decode()) == [message], name
        # Shown, so gone: the next page has no banner.
        assert BANNER.findall(client.get(reverse("attestations:account")).content.decode()) == [], name


def test_only_the_messages_region_renders_messages():
    """Every template that iterates `messages` is the one region base.html includes."""
    iterating = sorted(
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if re.search(r"{%\s*for\s+\w+\s+in\s+messages\s*%}", path.read_text())
    )
    assert iterating == [str(MESSAGES_REGION.relative_to(TEMPLATES))]


def test_allauths_own_layout_which_renders_messages_is_replaced_by_the_sites():
    import allauth

    theirs = Path(allauth.__file__).parent / "templates" / "allauth" / "layouts" / "base.html"
    ours = TEMPLATES / "allauth" / "layouts" / "base.html"
    assert "messages" in theirs.read_text()  # what ours replaces
    assert ours.read_text().lstrip().startswith('{% extends "base.html" %}')
    assert "messages" not in re.sub(r"{% comment %}.*?{% endcomment %}", "", ours.read_text(), flags=re.S)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_each_message_shows_once_on_me_in_chromium(live_server, browser, settings):
    settings.PAGE_CACHE_SECONDS = 3600
    make_user("newton")
    page = browser.new_context().new_page()
    page.goto(live_server.url + reverse("attestations:account"))
    page.fill("#id_login", "newton")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url("**/me/")
    assert page.locator(".banner").all_inner_texts() == [ACTIONS[0][2]]
    for _, _, message in ACTIONS[1:]:
        page.get_by_role("button", name=re.compile("token")).click()
        page.wait_for_load_state()
        assert page.url.endswith("/me/")
        assert page.locator(".banner").all_inner_texts() == [message]
    page.reload()
    assert page.locator(".banner").all_inner_texts() == []
