"""Probes for the load balancer and the orchestrator.

/healthz: the process is up and serving (touches nothing else; restart it when this fails).
/readyz: the database, the Celery broker and the cache answer, and no migration is pending
(send it no traffic while this fails).
"""

import logging
import time
import uuid

from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)
BROKER_TIMEOUT_S = 3


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request):
    checks = {name: _run(name, check) for name, check in CHECKS.items()}
    ready = all(result["ok"] for result in checks.values())
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503
    )


def _run(name, check) -> dict:
    started = time.monotonic()
    try:
        detail = check()
    except Exception as exc:
        # Details go to the log, not to whoever can reach the probe.
        logger.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
        return {"ok": False, "error": type(exc).__name__, "ms": _ms(started)}
    result = {"ok": detail is None, "ms": _ms(started)}
    if detail is not None:
        result["error"] = detail
    return result


def _database():
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _migrations():
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        return f"{len(pending)} migration(s) not applied"
    return None


def _cache():
    key, value = f"readyz:{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(key, value, timeout=30)
    try:
        if cache.get(key) != value:
            return "the cache did not return what was stored"
    finally:
        cache.delete(key)
    return None


def _broker():
    from kernelindex.celery import app

    with app.connection_for_write(connect_timeout=BROKER_TIMEOUT_S) as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_S)
        connection.default_channel  # noqa: B018 - opens a channel: the broker really answers
    return None


CHECKS = {"database": _database, "migrations": _migrations, "cache": _cache, "broker": _broker}


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
