"""The regressions feed is valid Atom (RFC 4287: IRI ids, an author, the required elements) and
built on SITE_URL; pages go out gzipped to clients that accept it, and only pages."""

import gzip
import xml.etree.ElementTree as ET

import pytest
from django.middleware import gzip as django_gzip
from django.urls import reverse

from registry import cache as page_cache
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


@pytest.mark.django_db
class TestAStoredPageIsCompressedOnce:
    def test_a_hit_sends_the_bytes_compressed_when_stored_without_compressing_again(
        self, client, monkeypatch
    ):
        url = reverse("registry:home")
        plain = client.get(url).content
        first = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
        assert first[page_cache.HIT_HEADER] == "miss"  # a client of each encoding has its own copy
        monkeypatch.setattr(
            django_gzip, "compress_string", lambda *a, **k: pytest.fail("compressed on a hit")
        )
        hit = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
        assert hit[page_cache.HIT_HEADER] == "hit"
        assert hit["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in hit["Vary"]
        assert int(hit["Content-Length"]) == len(hit.content)
        assert gzip.decompress(hit.content) == plain

    def test_a_signed_in_page_is_compressed_for_its_visitor(self, client, django_user_model):
        url = reverse("registry:home")
        client.get(url, HTTP_ACCEPT_ENCODING="gzip")
        client.force_login(django_user_model.objects.create_user("reader", password="x" * 12))
        response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
        assert response["Content-Encoding"] == "gzip"
        assert b"Sign out" in gzip.decompress(response.content)
