"""The request counter behind the API throttle and the submission limits loses no request, even
when many arrive at once (DRF's read-then-write history could)."""

import threading

import pytest
from django.core.cache import cache
from django.core.cache.backends.redis import RedisCache

from kernelindex.throttling import counter_incr


@pytest.mark.skipif(
    not isinstance(cache, RedisCache),
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


def test_a_new_counter_starts_at_one_and_expires():
    cache.delete("test-counter-expiry")
    assert counter_incr("test-counter-expiry", timeout=60) == 1
    assert counter_incr("test-counter-expiry", timeout=60) == 2
    cache.delete("test-counter-expiry")
    assert counter_incr("test-counter-expiry", timeout=60) == 1
