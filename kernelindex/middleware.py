"""Requests refused before any view sees them, with a clean 4xx (JSON under /api/)."""

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.middleware.gzip import GZipMiddleware


def error_response(request, status: int, message: str) -> HttpResponse:
    """JSON under /api/, as the API's own errors are; plain text elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


class HtmlGZipMiddleware(GZipMiddleware):
    """Pages go out gzipped (the largest kernel page shrinks about tenfold), with Django's BREACH
    mitigation. Only HTML: the API's own ETags and the streamed exports stay as they are, and
    static files come compressed from WhiteNoise already."""

    def process_response(self, request, response):
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)


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


class HeadAsGetMiddleware:
    """HEAD is GET without the body (RFC 9110 §9.3.2), for every view: the view sees GET, so a
    page, an API read or a probe answers HEAD with the status and headers its GET has (the page
    cache serves it too), where `require_GET`, the admin's `request.method == "GET"` tests and
    the like answered 405 or another status. The body is dropped here, a streamed export's
    included, so a HEAD never generates one; the Content-Length stays the GET's. WhiteNoise,
    before this, answers HEAD for static files itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method != "HEAD":
            return self.get_response(request)
        request.method = "GET"
        try:
            response = self.get_response(request)
        finally:
            request.method = "HEAD"
        if response.streaming:
            response.streaming_content = []
        else:
            length = response.get("Content-Length")
            response.content = b""
            if length is not None:
                response["Content-Length"] = length
        return response
