from django.urls import path

from attestations import views

app_name = "attestations"
urlpatterns = [
    path("runs/<int:pk>/attest/", views.attestation_create, name="attestation-create"),
    path("runs/<int:pk>/report/", views.issue_report_create, name="report-create"),
    path("runs/<int:pk>/attestations/", views.run_attestations, name="run-attestations"),
    path("attestations/<int:pk>/", views.attestation_detail, name="attestation-detail"),
    path("reports/<int:pk>/", views.issue_report_detail, name="report-detail"),
    path("me/submissions/", views.my_submissions, name="my-submissions"),
    path("me/", views.account, name="account"),
    path("me/api-token/", views.api_token_regenerate, name="api-token-regenerate"),
]
