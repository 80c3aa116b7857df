from django.urls import path, register_converter

from registry.cache import cached_page
from registry.reruns import views as job_views


class CardConverter:
    """A physical card's UUID prefix, as the fleet page names it: `GPU-` and eight hex digits."""

    regex = "GPU-[0-9a-f]{8}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(CardConverter, "card")

app_name = "jobs"
urlpatterns = [
    path("jobs/", job_views.job_list, name="list"),
    path("jobs/<int:pk>/", job_views.job_detail, name="detail"),
    # Public pages, served from the page cache to anonymous visitors as the registry's are.
    path("fleet/", cached_page(job_views.fleet_list), name="fleet"),
    path("fleet/<card:prefix>/", cached_page(job_views.fleet_card), name="fleet-card"),
]
