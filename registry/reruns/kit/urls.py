from django.urls import path

from registry.reruns.kit import views

urlpatterns = [
    path("kit/", views.kit_latest, name="kit-latest"),
    path("kit/<str:filename>", views.kit_file, name="kit-file"),
]
