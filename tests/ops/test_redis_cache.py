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
        seen[name] = (backend.get(f"redis-cache-thread-{name}"), id(backend._cache.get_client()))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {name: value for name, (value, _) in seen.items()} == {n: n for n in range(4)}
    assert len({client for _, client in seen.values()}) == 4


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
