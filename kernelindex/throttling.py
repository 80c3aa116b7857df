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


class AnonRateThrottle(throttling.AnonRateThrottle):
    """DRF's anonymous throttle (same rate setting, same client identification, same 429 and
    Retry-After), counted in a fixed window with `counter_incr`."""

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        window = int(time.time() // self.duration)
        self.window_ends = (window + 1) * self.duration
        return counter_incr(f"{self.key}:{window}", timeout=self.duration + 1) <= self.num_requests

    def wait(self):
        return max(1, math.ceil(self.window_ends - time.time()))
