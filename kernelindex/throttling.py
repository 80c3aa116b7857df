"""Counting requests in the cache: one fixed-window counter, shared by the API's anonymous
throttle and the submission and job-request limits (attestations.ratelimit).

DRF's own throttle keeps a list of request times per client, read and written back on every
request: two cache round trips, and two concurrent requests can each write back a list that
misses the other's entry. A counter incremented with Redis INCR loses no request and, with its
expiry sent in the same pipeline, costs one round trip, which matters on a page served from the
page cache (registry/cache.py), where that round trip is a third of the work.
"""

import math
import time

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from rest_framework import throttling


def counter_incr(key: str, *, timeout: int) -> int:
    """Add one to the counter `key` (created at 1, expiring after `timeout` seconds); its new value."""
    cache = caches["default"]  # the backend itself: `django.core.cache.cache` is a proxy
    if isinstance(cache, RedisCache):
        name = cache.make_and_validate_key(key)
        client = cache._cache.get_client(name, write=True)
        pipeline = client.pipeline(transaction=False)
        pipeline.incr(name)
        pipeline.expire(name, timeout)
        return pipeline.execute()[0]
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=timeout)
        return 1


def counter_incr_reading(key: str, *, timeout: int, keys: list[str]) -> tuple[int, dict]:
    """`counter_incr(key)` and `cache.get_many(keys)` at once: on Redis in one round trip (the
    page cache's lookup of an API read, registry/cache.py, rides with the throttle's count)."""
    cache = caches["default"]
    if not keys:
        return counter_incr(key, timeout=timeout), {}
    if not isinstance(cache, RedisCache):
        return counter_incr(key, timeout=timeout), cache.get_many(keys)
    name = cache.make_and_validate_key(key)
    names = [cache.make_and_validate_key(each) for each in keys]
    client = cache._cache.get_client(name, write=True)
    pipeline = client.pipeline(transaction=False)
    pipeline.incr(name)
    pipeline.expire(name, timeout)
    pipeline.mget(names)
    count, _, values = pipeline.execute()
    loads = cache._cache._serializer.loads  # as RedisCacheClient.get_many reads them
    return count, {each: loads(value) for each, value in zip(keys, values, strict=True) if value is not None}


class AnonRateThrottle(throttling.AnonRateThrottle):
    """DRF's anonymous throttle (same rate setting, same client identification, same 429 and
    Retry-After), counted in a fixed window with `counter_incr`. `counter` and `allow_count` let
    a view count the request in a round trip of its own (registry.cache.CachedReadMixin)."""

    def counter(self, request, view) -> tuple[str, int] | None:
        """The counter this request adds one to and its expiry, or None when it is not limited."""
        if self.rate is None:
            return None
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return None
        window = int(time.time() // self.duration)
        self.window_ends = (window + 1) * self.duration
        return f"{self.key}:{window}", self.duration + 1

    def allow_count(self, count: int) -> bool:
        return count <= self.num_requests

    def allow_request(self, request, view):
        counter = self.counter(request, view)
        return counter is None or self.allow_count(counter_incr(counter[0], timeout=counter[1]))

    def wait(self):
        return max(1, math.ceil(self.window_ends - time.time()))
