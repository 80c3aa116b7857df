"""Finding 3 of issue 36: whatever else can write to the cache's Redis must not run code on the web
tier. Django's Redis cache unpickles what it reads; a pickle written to the page cache's generation
key ran a shell command in a gunicorn worker at the next page view. Values are now signed
(kernelindex.redis_cache.SignedSerializer): one written without SECRET_KEY reads as a miss."""

import os
import pickle

import pytest
import redis
from django.conf import settings
from django.core.cache import cache, caches

from kernelindex.redis_cache import RedisCache
from registry.cache import GENERATION_KEY, PAGE_PREFIX, generation, generation_bump, local_pages

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not isinstance(caches["default"], RedisCache),
        reason="the page cache is on Redis when CACHE_URL=redis://...; the file cache is local",
    ),
]


class Payload:
    """What an attacker writes: unpickling it runs a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def raw():
    """The cache's Redis as another party sees it: a bare client, no Django, no SECRET_KEY."""
    client = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"])
    yield client
    client.close()


@pytest.fixture
def forged(tmp_path):
    marker = tmp_path / "pwned"
    return marker, pickle.dumps(Payload(marker))


def test_a_pickle_in_the_generation_key_is_not_run_and_the_page_is_served(client, raw, forged):
    marker, payload = forged
    generation_bump()
    raw.set(cache.make_key(GENERATION_KEY), payload)

    response = client.get("/")

    assert response.status_code == 200
    assert not marker.exists()
    assert type(generation()) is int  # replaced by a generation of ours
    generation_bump()  # a write after it works (INCR on our own integer again)
    assert not marker.exists()


def test_a_pickle_in_a_stored_page_is_not_run_and_the_page_is_rendered_again(client, raw, forged):
    marker, payload = forged
    assert client.get("/").status_code == 200  # stored
    pages = list(raw.scan_iter(match=f"*{PAGE_PREFIX}:*"))
    assert pages
    for key in pages:
        raw.set(key, payload)

    # This process serves its own copy, never reading the shared entry (registry.cache.local_pages).
    assert (client.get("/").status_code, marker.exists()) == (200, False)
    # Another web process, which holds no copy, reads the shared entry: refused, rendered again.
    local_pages.clear()
    response = client.get("/")

    assert (response.status_code, response["X-Page-Cache"]) == (200, "miss")
    assert not marker.exists()


def test_a_pickle_in_a_session_key_is_not_run(client, raw, forged):
    marker, payload = forged
    session_key = "a" * 32
    raw.set(cache.make_key(f"django.contrib.sessions.cached_db{session_key}"), payload)
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key

    response = client.get("/")

    assert response.status_code == 200
    assert not marker.exists()


def test_values_signed_by_another_key_read_as_a_miss(settings):
    from kernelindex.redis_cache import SignedSerializer

    serializer = SignedSerializer()
    ours = serializer.dumps({"generation": 1})
    assert serializer.loads(ours) == {"generation": 1}
    settings.SECRET_KEY = "another-deployment-s-key"
    assert serializer.loads(ours) is None
    assert serializer.loads(pickle.dumps({"generation": 1})) is None
    assert serializer.loads(b"41") == 41  # integers stay bare, for INCR
