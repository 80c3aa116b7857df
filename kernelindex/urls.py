from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kernelindex import health, metrics
from kernelindex.admin_login import RateLimitedAdminLoginForm
from registry.reruns.operations import operations_view

# The admin's login counts against allauth's failed-login limits, like the site's login.
admin.site.login_form = RateLimitedAdminLoginForm

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/operations/", admin.site.admin_view(operations_view), name="admin-operations"),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    path("api/v1/", include("registry.api_urls")),
    path("api/v1/", include("attestations.api_urls")),
    path("api/v1/", include("registry.reruns.api_urls")),
    path("", include("registry.reruns.kit.urls")),
    path("", include("attestations.urls")),
    path("", include("registry.reruns.urls")),
    path("", include("registry.urls")),
]
handler400 = "kernelindex.errors.bad_request_response"
handler404 = "kernelindex.errors.not_found"
handler429 = "kernelindex.errors.too_many_requests"  # allauth's rate limits
