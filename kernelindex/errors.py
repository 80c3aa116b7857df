"""Error pages: under /api/ every error answers JSON, as the API's own errors do; a rate-limited
page (allauth's signup, login, password reset) says when to try again."""

from allauth.account import app_settings as account_settings
from allauth.core.internal.ratelimit import handler429 as allauth_handler429
from allauth.core.internal.ratelimit import parse_rates
from django.http import JsonResponse
from django.views.defaults import bad_request, page_not_found


def not_found(request, exception):
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def bad_request_response(request, exception):
    """Django's 400 (an oversized body, a malformed upload, a suspicious request)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return bad_request(request, exception)


def too_many_requests(request):
    """allauth answers a rate-limited action with this (ROOT_URLCONF.handler429). Retry-After is
    the longest window of that action's limits: by then the client is allowed again."""
    response = allauth_handler429(request)
    response["Retry-After"] = str(_longest_window(_action_of(request)))
    return response


def _action_of(request) -> str:
    match = getattr(request, "resolver_match", None)
    name = (match.url_name or "") if match else ""
    return name.removeprefix("account_")


def _longest_window(action: str) -> int:
    """The login view is limited as "login" and "login_failed": both count."""
    limits = account_settings.RATE_LIMITS
    rates = [
        rate
        for key, value in limits.items()
        if action and key.startswith(action)
        for rate in parse_rates(value)
    ]
    rates = rates or [rate for value in limits.values() for rate in parse_rates(value)]
    return int(max((rate.duration for rate in rates), default=60))
