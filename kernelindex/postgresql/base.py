"""Django's PostgreSQL backend, with a health check that asks the operating system first.

With `CONN_HEALTH_CHECKS` (kernelindex/settings.py, docs/reliability.md) Django checks a reused
connection at the first query of every request with a `SELECT 1`: one more round trip for every
request that reads the database, a third of the database work of a signed-in page served from
the page cache (the user, the moderation region, the check). Between requests a connection is
idle and the server sends nothing on it unless it is ending it (a restart sends its error and
closes the socket): so a socket with nothing to read is taken as usable, without the round trip,
and only one with something waiting is asked with `SELECT 1`, as Django asks every time.
"""

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self):
        if self.connection is None or self.connection.closed or self.connection.broken:
            return False
        try:
            waiting, _, _ = select.select([self.connection.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not waiting or super().is_usable()
