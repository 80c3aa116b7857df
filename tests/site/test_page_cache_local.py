"""Each web process's own copies of stored pages (registry/cache.py, `local_pages`): a hit on one
reads the registry's generation from the shared cache and not the page, and a copy is never
served once the generation has moved, whichever process moved it, or after PAGE_CACHE_SECONDS."""

import pytest
from django.test import RequestFactory
from django.urls import reverse

from registry import cache as page_cache
from registry.models import BenchmarkRun
from tests.site.conftest import liger_rows

SMALL = {"providers": ("liger", "huggingface"), "gpus": 1, "xs": (1024, 2048), "modes": ("backward",)}
URL = reverse("registry:kernel-detail", args=["geglu"])


@pytest.fixture
def registry(import_rows):
    import_rows(liger_rows(**SMALL))
    return BenchmarkRun.objects.all()


def shared_key(url: str = URL) -> str:
    return page_cache.PageSlot(RequestFactory().get(url), variant="html").key


@pytest.mark.django_db
class TestAHitOnThisProcesssCopy:
    def test_it_is_served_without_the_shared_entry(self, client, registry, django_assert_num_queries):
        first = client.get(URL)
        page_cache.cache.delete(shared_key())  # only this process's copy is left
        with django_assert_num_queries(0):
            second = client.get(URL)
        assert second[page_cache.HIT_HEADER] == "hit"
        assert second.content == first.content

    def test_it_reads_the_generation_and_not_the_page(self, client, registry, monkeypatch):
        client.get(URL)
        read, current = [], page_cache.generation()
        monkeypatch.setattr(page_cache.cache, "get", lambda key, *a: read.append(key) or current)
        monkeypatch.setattr(page_cache.cache, "get_many", lambda keys: read.append(tuple(keys)) or {})
        assert client.get(URL)[page_cache.HIT_HEADER] == "hit"
        assert read == [page_cache.GENERATION_KEY]

    def test_it_is_not_served_once_another_process_moved_the_generation(self, client, registry):
        client.get(URL)
        page_cache._increment()  # what another process's generation_bump() does to the shared value
        assert client.get(URL)[page_cache.HIT_HEADER] == "miss"

    def test_a_fresher_page_another_process_stored_replaces_it(self, client, registry):
        client.get(URL)
        page_cache._increment()
        fresher = {
            "generation": page_cache.generation(),
            "status": 200,
            "content": b"stored by another process",
            "headers": [("Content-Type", "text/html; charset=utf-8")],
        }
        page_cache.cache.set(shared_key(), fresher)
        assert client.get(URL).content == b"stored by another process"
        page_cache.cache.delete(shared_key())
        assert client.get(URL).content == b"stored by another process"  # now the copy here

    def test_it_is_not_served_after_page_cache_seconds(self, client, registry, monkeypatch):
        client.get(URL)
        page_cache.cache.delete(shared_key())
        now = page_cache.time.monotonic()
        monkeypatch.setattr(page_cache.time, "monotonic", lambda: now + 86400 + 1)
        assert client.get(URL)[page_cache.HIT_HEADER] == "miss"


class TestTheCopiesStayWithinTheirSize:
    def entry(self, size: int) -> dict:
        return {"generation": 1, "status": 200, "content": b"x" * size, "headers": []}

    def test_the_least_recently_used_go_first(self, settings):
        settings.PAGE_CACHE_LOCAL_MB = 1
        pages = page_cache._LocalPages()
        for name in ("a", "b", "c"):
            pages.put(name, self.entry(400_000))
            pages.get("a")
        assert [pages.get(name) is not None for name in ("a", "b", "c")] == [True, False, True]

    def test_zero_keeps_none(self, settings):
        settings.PAGE_CACHE_LOCAL_MB = 0
        pages = page_cache._LocalPages()
        pages.put("a", self.entry(10))
        assert pages.get("a") is None


class NoReads:
    def __getattr__(self, name):
        pytest.fail(f"the page cache read the cache on its own ({name})")


@pytest.mark.django_db
class TestAnApiHit:
    def test_the_throttle_counts_it_in_the_round_trip_that_reads_the_generation(
        self, client, registry, monkeypatch
    ):
        url = reverse("run-list") + "?kernel=geglu"
        client.get(url)
        reads = []
        counted = page_cache.counter_incr_reading
        monkeypatch.setattr(
            page_cache,
            "counter_incr_reading",
            lambda key, **kw: reads.append(kw["keys"]) or counted(key, **kw),
        )
        monkeypatch.setattr(page_cache, "cache", NoReads())
        assert client.get(url)[page_cache.HIT_HEADER] == "hit"
        assert reads == [[page_cache.GENERATION_KEY]]
