from django.urls import path

from registry import views

app_name = "registry"
urlpatterns = [
    path("", views.home, name="home"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("kernels/<slug:slug>/", views.kernel_detail, name="kernel-detail"),
    path("sources/<slug:slug>/", views.source_detail, name="source-detail"),
]
