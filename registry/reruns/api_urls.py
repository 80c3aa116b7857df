from rest_framework.routers import SimpleRouter

from registry.reruns.api import JobViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns = router.urls
