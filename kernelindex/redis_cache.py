"""Django's Redis cache backend, with one redis-py client per connection pool and signed values.

Django's `RedisCacheClient.get_client` builds a new `redis.Redis` for every cache operation, and
redis-py's constructor copies its table of some 170 response callbacks each time. On a page served
from the page cache (registry/cache.py: the throttle's INCR, then one MGET) those two constructions
were a quarter of the request's Python time (cProfile, 1,000 cached API reads). A `redis.Redis` is
safe to share between threads (each command borrows a connection from the pool), and redis-py's
pool reconnects after a fork, so one client per pool does what the fresh ones did.

Values are pickled, as Django's serializer does, but each carries an HMAC-SHA256 under a key
derived from SECRET_KEY (`SignedSerializer`): whoever else can write to the cache's Redis (a GPU
worker given the wrong ACL, a neighbour on a shared server) cannot make the web tier unpickle
anything, since only holders of SECRET_KEY can sign. A value whose signature fails reads as a miss.

With a KEY_PREFIX (`web` by default, kernelindex/settings.py; `CACHE_URL=redis://...?key_prefix=NAME`),
`clear()` removes that prefix's keys only, where Django's empties the whole database: so two
sites, or two parallel test workers (tests/settings.py), can share one Redis database, and one's
clear leaves the other's keys (and a broker's on the same database) alone.
"""

import hmac
import logging
import pickle
import re

from django.core.cache.backends import redis as django_redis
from django.core.cache.backends.base import default_key_func
from django.utils.crypto import salted_hmac

# Redis glob patterns give these characters a meaning; a prefix is matched as written.
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")

logger = logging.getLogger(__name__)
SIGNED_PREFIX = b"ki-signed-1:"
SALT = "kernelindex.redis_cache.SignedSerializer"
MAC_BYTES = 32  # sha256


class SignedSerializer:
    """Pickle, then sign; check the signature before anything is unpickled. Integers stay bare, as
    in Django's serializer, so that INCR works on them (a forged integer is only a number)."""

    def dumps(self, obj):
        if type(obj) is int:
            return obj
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
        return SIGNED_PREFIX + _mac(data) + data

    def loads(self, data):
        try:
            return int(data)
        except ValueError:
            pass
        if not data.startswith(SIGNED_PREFIX):
            return _refused("no signature")
        mac, payload = data[len(SIGNED_PREFIX) :][:MAC_BYTES], data[len(SIGNED_PREFIX) + MAC_BYTES :]
        if not hmac.compare_digest(mac, _mac(payload)):
            return _refused("a signature that does not match")
        return pickle.loads(payload)


def _mac(data: bytes) -> bytes:
    return salted_hmac(SALT, data, algorithm="sha256").digest()


def _refused(why: str):
    # None: Django's get() and get_many() give the caller a miss, never the stored bytes.
    logger.warning("A cache value with %s was not loaded (read as a miss)", why)
    return None


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("serializer", SignedSerializer)
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

    def clear(self):
        if not self.key_prefix or self.key_func is not default_key_func:
            return super().clear()
        client = self._cache.get_client(write=True)
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.key_prefix) + ":*"
        batch = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) == 1000:
                client.unlink(*batch)
                batch = []
        if batch:
            client.unlink(*batch)
        return True
