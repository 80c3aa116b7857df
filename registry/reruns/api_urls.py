from django.urls import path
from rest_framework.routers import SimpleRouter

from registry.reruns.api import FleetAPI, JobViewSet, RunSpecView

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    *router.urls,
    path("runs/<int:pk>/spec/", RunSpecView.as_view(), name="run-spec"),
    path("fleet/", FleetAPI.as_view(), name="fleet-api"),
]
