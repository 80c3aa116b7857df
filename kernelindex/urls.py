from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kernelindex import health, metrics
from kernelindex.admin_login import RateLimitedAdminLoginForm
from registry.reruns.operations import operations_view

# The admin's login counts against allauth's failed-login limits, like the site's login.
admin.site.login_form = RateLimitedAdminLoginForm

# Django tries these in order, every pattern of an include in turn: the API and the registry's
# pages, which nearly every request asks for, come first. The API's entries are first because a
# page's path leaves each of them at its prefix (three string comparisons), where an API path would
# try every pattern of the registry's include; a page's URL then resolves after a dozen patterns
# rather than fifty. No path matches two entries (tests/site/test_url_order.py), so the order
# decides speed only. The floor that the benchmarks compare pages with (bench/urls.py) sits first.
urlpatterns = [
    path("api/v1/", include("registry.api_urls")),
    path("api/v1/", include("attestations.api_urls")),
    path("api/v1/", include("registry.reruns.api_urls")),
    path("", include("registry.urls")),
    path("", include("attestations.urls")),
    path("", include("registry.reruns.urls")),
    path("", include("registry.reruns.kit.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    path("accounts/", include("allauth.urls")),
    path("admin/operations/", admin.site.admin_view(operations_view), name="admin-operations"),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
]
handler400 = "kernelindex.errors.bad_request_response"
handler404 = "kernelindex.errors.not_found"
handler429 = "kernelindex.errors.too_many_requests"  # allauth's rate limits
