"""The changes page is reachable from every page's header."""

import pytest
from django.urls import reverse


@pytest.mark.django_db
def test_the_header_links_to_the_changes_page(client):
    response = client.get(reverse("registry:home"))

    assert response.status_code == 200
    assert f'href="{reverse("registry:change-list")}"'.encode() in response.content
