from django.urls import path, register_converter

from registry import views


class DigestConverter:
    """`sha256:` and 64 lowercase hex digits: a run's permanent, content-derived name."""

    regex = "sha256:[0-9a-f]{64}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(DigestConverter, "digest")

app_name = "registry"
urlpatterns = [
    path("", views.home, name="home"),
    path("runs/", views.run_list, name="run-list"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<digest:digest>/", views.run_detail, name="run-by-digest"),
    path("runs/<int:pk>/compare/", views.run_compare_best, name="run-compare-best"),
    path("runs/<int:pk>/cite.bib", views.run_cite_bibtex, name="run-cite-bibtex"),
    path("runs/<int:pk>/cite.json", views.run_cite_csl, name="run-cite-csl"),
    path("compare/", views.compare_form, name="compare-form"),
    path("compare/<int:a>/<int:b>/", views.compare, name="compare"),
    path("kernels/", views.kernel_list, name="kernel-list"),
    path("kernels/<slug:slug>/", views.kernel_detail, name="kernel-detail"),
    path("gpus/", views.gpu_list, name="gpu-list"),
    path("gpus/<slug:slug>/", views.gpu_detail, name="gpu-detail"),
    path("implementations/", views.implementation_list, name="implementation-list"),
    path("implementations/<path:provider>/", views.implementation_detail, name="implementation-detail"),
    path("sources/", views.source_list, name="source-list"),
    path("sources/<slug:slug>/", views.source_detail, name="source-detail"),
    path("search/", views.search, name="search"),
]
