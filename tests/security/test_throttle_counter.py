"""The request counter behind the API throttle and the submission limits loses no request, even
when many arrive at once (DRF's read-then-write history could)."""

import threading

import pytest
from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache

from kernelindex.throttling import counter_incr, counter_incr_reading


@pytest.mark.skipif(
    not isinstance(caches["default"], RedisCache),
    reason="atomic counting needs the Redis cache (CACHE_URL=redis://...); the embedded file cache's incr is a read and a write",
)
def test_concurrent_increments_are_all_counted():
    cache.delete("test-counter")
    barrier = threading.Barrier(16)
    values = []

    def hit():
        barrier.wait()
        for _ in range(25):
            values.append(counter_incr("test-counter", timeout=60))

    threads = [threading.Thread(target=hit) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(values) == list(range(1, 401))  # every value handed out once: no lost update
    assert cache.get("test-counter") == 400


def test_on_redis_a_count_is_one_round_trip(monkeypatch):
    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        pytest.skip("the one-round-trip path is Redis's (CACHE_URL=redis://...)")
    client = backend._cache.get_client(backend.make_and_validate_key("test-counter-trips"), write=True)
    calls = []
    original = type(client).execute_command
    monkeypatch.setattr(
        type(client), "execute_command", lambda self, *a, **k: calls.append(a[0]) or original(self, *a, **k)
    )
    backend.delete("test-counter-trips")
    calls.clear()
    assert counter_incr("test-counter-trips", timeout=60) == 1
    assert calls == []  # no single command: INCR and EXPIRE went together in one pipeline


def test_a_new_counter_starts_at_one_and_expires():
    cache.delete("test-counter-expiry")
    assert counter_incr("test-counter-expiry", timeout=60) == 1
    assert counter_incr("test-counter-expiry", timeout=60) == 2
    cache.delete("test-counter-expiry")
    assert counter_incr("test-counter-expiry", timeout=60) == 1


def test_a_count_with_reads_is_one_round_trip_and_reads_what_get_many_reads(monkeypatch):
    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        pytest.skip("the one-round-trip path is Redis's (CACHE_URL=redis://...)")
    cache.set("test-read-a", {"stored": 1})
    cache.delete_many(["test-read-b", "test-counter-reads"])
    client = backend._cache.get_client(backend.make_and_validate_key("test-counter-reads"), write=True)
    calls = []
    original = type(client).execute_command
    monkeypatch.setattr(
        type(client), "execute_command", lambda self, *a, **k: calls.append(a[0]) or original(self, *a, **k)
    )
    count, found = counter_incr_reading("test-counter-reads", timeout=60, keys=["test-read-a", "test-read-b"])
    assert calls == []  # INCR, EXPIRE and MGET went together in one pipeline
    assert count == 1
    assert found == cache.get_many(["test-read-a", "test-read-b"]) == {"test-read-a": {"stored": 1}}
