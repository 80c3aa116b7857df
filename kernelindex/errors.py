"""Error pages: an unknown URL under /api/ answers JSON, as the API's own 404s do."""

from django.http import JsonResponse
from django.views.defaults import page_not_found


def not_found(request, exception):
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
