"""Requests refused before any view sees them, with a clean 4xx (JSON under /api/)."""

from django.conf import settings
from django.http import HttpResponse, JsonResponse


def error_response(request, status: int, message: str) -> HttpResponse:
    """JSON under /api/, as the API's own errors are; plain text elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


class RequestLimitsMiddleware:
    """A NUL character in the path or the query string is never part of a name KernelIndex
    gives out, and PostgreSQL refuses it in any text it is asked to compare (a 500 from every
    lookup view): 400 here, once, instead of a check in each view. A body longer than
    REQUEST_BODY_MAX_BYTES is refused from its Content-Length before it is read (Django's own
    DATA_UPLOAD_MAX_MEMORY_SIZE leaves out uploaded files, which are spooled to disk)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            return error_response(request, 400, "A NUL character is not allowed in a URL.")
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return error_response(request, 400, "Content-Length is not a number.")
        if length > settings.REQUEST_BODY_MAX_BYTES:
            return error_response(
                request,
                413,
                f"The request body is {length} bytes; the limit is {settings.REQUEST_BODY_MAX_BYTES}.",
            )
        return self.get_response(request)


class AdminFilterOverflowMiddleware:
    """The admin's lists take any field lookup from the query string; a date part beyond what
    Python's datetime holds (`?created_at__year=99999999999`) raises OverflowError, which Django
    lets through as a 500 (it catches only ValueError). That is the client's bad filter: 400."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        match = getattr(request, "resolver_match", None)
        if isinstance(exception, OverflowError) and match and match.url_name.endswith("_changelist"):
            return error_response(request, 400, "A filter value in the query string is out of range.")
        return None
