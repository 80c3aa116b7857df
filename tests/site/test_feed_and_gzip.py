"""The regressions feed is valid Atom (RFC 4287: IRI ids, an author, the required elements) and
built on SITE_URL; pages go out gzipped to clients that accept it, and only pages."""

import gzip
import xml.etree.ElementTree as ET

import pytest
from django.urls import reverse

from registry.models import Change, ChangeKind
from tests.registry.test_history_changes import history  # noqa: F401 (a fixture)

ATOM = "{http://www.w3.org/2005/Atom}"
SITE = "https://kernelindex.example.org"


@pytest.fixture
def feed(client, history, settings):  # noqa: F811
    settings.SITE_URL = SITE
    response = client.get(reverse("registry:change-feed"))
    assert response.status_code == 200
    return ET.fromstring(response.content)


@pytest.mark.django_db
class TestTheRegressionsFeed:
    def test_every_link_and_id_is_built_on_site_url(self, feed):
        links = [link.get("href") for link in feed.iter(f"{ATOM}link")]
        ids = [element.text for element in feed.iter(f"{ATOM}id")]
        assert len(ids) == 1 + Change.objects.filter(kind=ChangeKind.REGRESSION).count()
        for value in links + ids:
            assert value.startswith(SITE + "/"), value
        assert b"example.com" not in ET.tostring(feed)

    def test_it_has_what_rfc_4287_requires(self, feed):
        assert feed.find(f"{ATOM}author/{ATOM}name").text == "KernelIndex"
        for element in ("id", "title", "updated"):
            assert feed.find(f"{ATOM}{element}") is not None
        entries = feed.findall(f"{ATOM}entry")
        assert entries
        for entry in entries:
            for element in ("id", "title", "updated"):
                assert entry.find(f"{ATOM}{element}").text, element
            assert entry.find(f"{ATOM}link[@rel='alternate']") is not None
        ids = [entry.find(f"{ATOM}id").text for entry in entries]
        assert len(set(ids)) == len(ids)


@pytest.mark.django_db
class TestGzip:
    def test_a_page_is_gzipped_for_a_client_that_accepts_it(self, client):
        response = client.get(reverse("registry:home"), HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200
        assert response["Content-Encoding"] == "gzip"
        assert b"<h1>KernelIndex</h1>" in gzip.decompress(response.content)

    def test_a_page_is_plain_for_a_client_that_does_not(self, client):
        response = client.get(reverse("registry:home"))
        assert not response.has_header("Content-Encoding")

    def test_the_api_keeps_its_own_encoding(self, client):
        response = client.get("/api/v1/runs/", HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200
        assert not response.has_header("Content-Encoding")
