from django.urls import path
from rest_framework.routers import SimpleRouter

from registry.reruns.api import JobViewSet, RunSpecView

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    *router.urls,
    path("runs/<int:pk>/spec/", RunSpecView.as_view(), name="run-spec"),
]
