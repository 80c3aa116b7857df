from django.urls import path

from attestations import api

urlpatterns = [
    path("runs/<int:run_pk>/attestations/", api.RunAttestationList.as_view(), name="run-attestation-list"),
    path(
        "runs/<int:run_pk>/reproductions/", api.RunReproductionCreate.as_view(), name="api-run-reproductions"
    ),
    path("attestations/", api.AttestationListCreate.as_view(), name="attestation-list"),
    path("attestations/<int:pk>/", api.AttestationDetail.as_view(), name="attestation-detail"),
    path("issue-reports/", api.IssueReportListCreate.as_view(), name="issue-report-list"),
    path("issue-reports/<int:pk>/", api.IssueReportDetail.as_view(), name="issue-report-detail"),
]
