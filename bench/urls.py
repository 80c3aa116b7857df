"""The production URLconf with a floor view in front: a one-line Django view that returns a fixed
string through the same middleware, server and settings. Its throughput is what Django itself
allows on this machine; every page is reported as a fraction of it."""

from django.http import HttpResponse
from django.urls import include, path


def floor(request):
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("bench/floor/", floor, name="bench-floor"),
    path("", include("kernelindex.urls")),
]
