from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

# The admin signs in through allauth's login page: one login form, with its rate limits.
admin.site.login = secure_admin_login(admin.site.login)

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
handler404 = "kernelindex.errors.not_found"
