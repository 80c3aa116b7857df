from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kernelindex import health, metrics
from registry.admin import operations_view

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/operations/", admin.site.admin_view(operations_view), name="admin-operations"),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("registry.api_urls")),
    path("api/v1/", include("attestations.api_urls")),
    path("api/v1/", include("registry.job_api_urls")),
    path("", include("attestations.urls")),
    path("", include("registry.job_urls")),
    path("", include("registry.urls")),
]
