from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
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
