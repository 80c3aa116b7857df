from django.urls import path
from rest_framework.routers import DefaultRouter

from registry import api, change_pages

router = DefaultRouter()
router.register("runs", api.RunViewSet, basename="run")
router.register("kernels", api.KernelViewSet, basename="kernel")
router.register("implementations", api.ImplementationViewSet, basename="implementation")
router.register("environments", api.EnvironmentViewSet, basename="environment")
router.register("sources", api.SourceViewSet, basename="source")
router.register("groups", api.ComparisonGroupViewSet, basename="comparison-group")
router.register("manifests", api.ManifestViewSet, basename="manifest")
router.register("changes", change_pages.ChangeViewSet, basename="change")

urlpatterns = [
    path("export/runs.csv", api.RunExportCSV.as_view(), name="export-csv"),
    path("export/runs.jsonl", api.RunExportJSONLines.as_view(), name="export-jsonl"),
    *router.urls,
]
