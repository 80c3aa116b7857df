from django.urls import path

from registry.reruns import views as job_views

app_name = "jobs"
urlpatterns = [
    path("jobs/", job_views.job_list, name="list"),
    path("jobs/<int:pk>/", job_views.job_detail, name="detail"),
]
