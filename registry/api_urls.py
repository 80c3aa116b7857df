from rest_framework.routers import DefaultRouter

from registry.api import RunViewSet

router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")

urlpatterns = router.urls
