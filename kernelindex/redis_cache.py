"""Django's Redis cache backend, with one redis-py client per connection pool.

Django's `RedisCacheClient.get_client` builds a new `redis.Redis` for every cache operation, and
redis-py's constructor copies its table of some 170 response callbacks each time. On a page served
from the page cache (registry/cache.py: the throttle's INCR, then one MGET) those two constructions
were a quarter of the request's Python time (cProfile, 1,000 cached API reads). A `redis.Redis` is
safe to share between threads (each command borrows a connection from the pool), and redis-py's
pool reconnects after a fork, so one client per pool does what the fresh ones did.
"""

from django.core.cache.backends import redis as django_redis


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            client = self._clients[index] = self._client(connection_pool=self._get_connection_pool(write))
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
