from django.urls import path, register_converter
from django.views.decorators.http import require_safe

from registry import change_pages, views
from registry.cache import cached_page


class DigestConverter:
    """`sha256:` and 64 lowercase hex digits: a run's permanent, content-derived name."""

    regex = "sha256:[0-9a-f]{64}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(DigestConverter, "digest")


# Public pages are served from the page cache to anonymous visitors (registry/cache.py); the
# citation downloads are not (each prints today's access date and is rarely asked twice).
app_name = "registry"
urlpatterns = [
    path("", cached_page(views.home), name="home"),
    path("runs/", cached_page(views.run_list), name="run-list"),
    path("runs/<int:pk>/", cached_page(views.run_detail), name="run-detail"),
    path("runs/<digest:digest>/", cached_page(views.run_detail), name="run-by-digest"),
    path(
        "runs/<int:pk>/compare/",
        cached_page(views.run_compare_best, statuses=(200, 302)),
        name="run-compare-best",
    ),
    path("runs/<int:pk>/cite.bib", views.run_cite_bibtex, name="run-cite-bibtex"),
    path("runs/<int:pk>/cite.json", views.run_cite_csl, name="run-cite-csl"),
    path("compare/", cached_page(views.compare_form), name="compare-form"),
    path("compare/<int:a>/<int:b>/", cached_page(views.compare), name="compare"),
    path("kernels/", cached_page(views.kernel_list), name="kernel-list"),
    path("kernels/<slug:slug>/", cached_page(views.kernel_detail), name="kernel-detail"),
    path("gpus/", cached_page(views.gpu_list), name="gpu-list"),
    path("gpus/<slug:slug>/", cached_page(views.gpu_detail), name="gpu-detail"),
    path("implementations/", cached_page(views.implementation_list), name="implementation-list"),
    path(
        "implementations/<path:provider>/",
        cached_page(views.implementation_detail),
        name="implementation-detail",
    ),
    path("sources/", cached_page(views.source_list), name="source-list"),
    path("sources/<slug:slug>/", cached_page(views.source_detail), name="source-detail"),
    path("search/", cached_page(views.search, statuses=(200, 302)), name="search"),
    path("glossary/", cached_page(views.glossary), name="glossary"),
    path("changes/", cached_page(change_pages.change_list), name="change-list"),
    path("changes/regressions.atom", require_safe(change_pages.RegressionFeed()), name="change-feed"),
]
