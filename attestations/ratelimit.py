"""Per-user and per-IP limits on submissions (attestations and issue reports), kept in the cache.

A fixed window per limit: simple, shared by every web node through the cache (Redis in
production), and good enough to stop a flood. Forms and the API call the same function.
"""

import time
from dataclasses import dataclass

from allauth.account.adapter import get_adapter
from django.conf import settings

from kernelindex.throttling import counter_incr

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Limited:
    message: str
    retry_after: int


def parse_rate(rate: str) -> tuple[int, int]:
    """ "10/h" → (10, 3600)."""
    amount, _, period = rate.partition("/")
    return int(amount), PERIODS[period]


def submission_consume(request) -> Limited | None:
    """Count one submission for the user and the client address; `Limited` if either is over."""
    limits = settings.ATTESTATIONS_SUBMISSION_LIMITS
    return limit_consume(request, action="submit", limits=limits, what="submissions", verb="file")


def limit_consume(request, *, action: str, limits: dict, what: str, verb: str) -> Limited | None:
    """Count one `action` for the user and the client address against `limits` ({"user": "10/h",
    "ip": "30/h"}, either may be empty); `Limited` if either is over."""
    keys = {"user": f"user:{request.user.pk}", "ip": f"ip:{get_adapter().get_client_ip(request)}"}
    for scope in ("user", "ip"):
        if not limits.get(scope):
            continue
        amount, period = parse_rate(limits[scope])
        window = int(time.time() // period)
        key = f"attestations:{action}:{keys[scope]}:{window}"
        count = counter_incr(key, timeout=period + 60)
        if count > amount:
            retry_after = int((window + 1) * period - time.time()) + 1
            who = "you" if scope == "user" else "your network address"
            return Limited(
                message=(
                    f"Too many {what}: {who} may {verb} {amount} per {_period_name(period)}. "
                    f"Please try again in {_duration(retry_after)}."
                ),
                retry_after=retry_after,
            )
    return None


def _period_name(seconds: int) -> str:
    return {1: "second", 60: "minute", 3600: "hour", 86400: "day"}[seconds]


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} seconds"
    if seconds < 5400:
        return f"{round(seconds / 60)} minutes"
    return f"{round(seconds / 3600)} hours"
