"""The Redis cache backend keeps one redis-py client per connection pool
(kernelindex/redis_cache.py) and still behaves as Django's: across threads and after a fork."""

import multiprocessing
import threading

import pytest
from django.core.cache import caches

from kernelindex.redis_cache import RedisCache

pytestmark = pytest.mark.skipif(
    not isinstance(caches["default"], RedisCache),
    reason="the Redis backend is used when CACHE_URL=redis://...; the embedded default is the file cache",
)


def test_one_client_serves_every_operation():
    backend = caches["default"]
    first = backend._cache.get_client("a", write=True)
    assert backend._cache.get_client("b", write=True) is first
    backend.set("redis-cache-test", {"n": 1}, 30)
    assert backend.get("redis-cache-test") == {"n": 1}
    assert backend._cache.get_client("c") is first  # one server: reads and writes share the pool


def test_threads_share_nothing_they_should_not():
    """Each thread has its own backend (Django's `caches` is per thread); values cross threads."""
    seen = {}

    def work(name):
        backend = caches["default"]
        backend.set(f"redis-cache-thread-{name}", name, 30)
        # The client itself, not its id(): a finished thread's client freed, a later one could
        # take its address.
        seen[name] = (backend.get(f"redis-cache-thread-{name}"), backend._cache.get_client())

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {name: value for name, (value, _) in seen.items()} == {n: n for n in range(4)}
    assert len({id(client) for _, client in seen.values()}) == 4


def _in_child(queue):
    backend = caches["default"]
    backend.set("redis-cache-fork", "child", 30)
    queue.put(backend.get("redis-cache-fork"))


def test_a_forked_child_uses_the_parents_client_safely():
    """gunicorn forks its workers: a client (and pool) made in the parent must not hand the child
    the parent's sockets; redis-py's pool notices the new pid and opens its own."""
    backend = caches["default"]
    backend.set("redis-cache-fork", "parent", 30)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=30) == "child"
    child.join(timeout=30)
    assert child.exitcode == 0
    assert backend.get("redis-cache-fork") == "child"  # the parent's connection still answers


class TestClearWithAKeyPrefix:
    """Two caches with their own prefixes on one Redis database (two sites, or two xdist workers,
    tests/settings.py): one's clear() removes its own keys and leaves the other's."""

    def _backend(self, prefix: str) -> RedisCache:
        location = caches["default"]._servers
        return RedisCache(location, {"KEY_PREFIX": prefix})

    def test_clear_removes_only_its_own_keys(self):
        mine, theirs = self._backend("clear-test-a*["), self._backend("clear-test-b")
        for n in range(1200):  # more than one SCAN batch
            mine.set(f"k{n}", n, 60)
        theirs.set("k0", "kept", 60)
        unprefixed = mine._cache.get_client(write=True)
        unprefixed.set("clear-test-a-not-a-cache-key", b"kept", ex=60)
        try:
            assert mine.clear() is True
            assert mine.get("k0") is None and mine.get("k1199") is None
            assert theirs.get("k0") == "kept"
            assert unprefixed.get("clear-test-a-not-a-cache-key") == b"kept"
        finally:
            theirs.clear()
            unprefixed.delete("clear-test-a-not-a-cache-key")

    def test_without_a_prefix_clear_empties_the_database_as_djangos_does(self, monkeypatch):
        backend = self._backend("")
        flushed = []
        client = backend._cache.get_client(write=True)
        monkeypatch.setattr(client, "flushdb", lambda: flushed.append(True) or True)
        assert backend.clear() is True
        assert flushed == [True]
