"""The attestations API: public lists of approved attestations; authenticated create and
list-own for attestations and issue reports. Session authentication keeps its CSRF check;
token authentication needs none. The same services and rate limits as the forms."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response

from attestations import ratelimit, services
from attestations.models import Attestation, IssueReport
from attestations.serializers import (
    AttestationInputSerializer,
    AttestationSerializer,
    IssueReportInputSerializer,
    IssueReportSerializer,
    OwnAttestationSerializer,
)
from registry.models import BenchmarkRun


def _call(service, **kwargs):
    """A service's ValidationError becomes DRF's 400 with the same field names."""
    try:
        return service(**kwargs)
    except DjangoValidationError as exc:
        if hasattr(exc, "error_dict"):
            detail = {
                ("non_field_errors" if field == "__all__" else field): messages
                for field, messages in exc.message_dict.items()
            }
        else:
            detail = {"non_field_errors": exc.messages}
        raise serializers.ValidationError(detail) from None


def _limited_response(request):
    limited = ratelimit.submission_consume(request)
    if limited is None:
        return None
    return Response(
        {"detail": limited.message},
        status=status.HTTP_429_TOO_MANY_REQUESTS,
        headers={"Retry-After": str(limited.retry_after)},
    )


def _create(request, *, input_serializer, service, owner: str, output_serializer):
    """Validate, check the submission limit, then call the one service that writes: a 201 with
    the new object as its owner sees it."""
    data = input_serializer(data=request.data)
    data.is_valid(raise_exception=True)
    limited = _limited_response(request)
    if limited:
        return limited
    created = _call(service, **{owner: request.user}, **data.validated_data)
    return Response(output_serializer(created).data, status=status.HTTP_201_CREATED)


class RunAttestationList(generics.ListAPIView):
    """Approved reproductions and notes of one run, oldest first."""

    serializer_class = AttestationSerializer
    permission_classes = [permissions.AllowAny]
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Attestation.objects.none()
        run = get_object_or_404(BenchmarkRun.objects.public(), pk=self.kwargs["run_pk"])
        return (
            Attestation.objects.approved()
            .filter(run=run)
            .select_related("author")
            .order_by("created_at", "pk")
        )


class AttestationListCreate(generics.ListAPIView):
    """Your own attestations in every state (GET); file a new one (POST), pending until a
    moderator decides."""

    serializer_class = OwnAttestationSerializer
    permission_classes = [permissions.IsAuthenticated]
    queryset = Attestation.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self):
        return (
            Attestation.objects.filter(author=self.request.user)
            .select_related("author")
            .order_by("-created_at", "-pk")
        )

    @extend_schema(request=AttestationInputSerializer, responses={201: OwnAttestationSerializer})
    def post(self, request):
        return _create(
            request,
            input_serializer=AttestationInputSerializer,
            service=services.attestation_submit,
            owner="author",
            output_serializer=OwnAttestationSerializer,
        )


class AttestationDetail(generics.RetrieveAPIView):
    """One attestation: approved ones for everyone; your own in any state, with its state."""

    serializer_class = AttestationSerializer
    permission_classes = [permissions.AllowAny]

    def get_queryset(self):
        return Attestation.objects.visible_to(self.request.user).select_related("author")

    def retrieve(self, request, *args, **kwargs):
        attestation = self.get_object()
        own = attestation.author_id == request.user.pk or request.user.has_perm(services.MODERATE_ATTESTATION)
        serializer = OwnAttestationSerializer if own else AttestationSerializer
        return Response(serializer(attestation).data)


class IssueReportListCreate(generics.ListAPIView):
    """Your own issue reports with their state (GET); file a new one (POST)."""

    serializer_class = IssueReportSerializer
    permission_classes = [permissions.IsAuthenticated]
    queryset = IssueReport.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self):
        return IssueReport.objects.filter(reporter=self.request.user).order_by("-created_at", "-pk")

    @extend_schema(request=IssueReportInputSerializer, responses={201: IssueReportSerializer})
    def post(self, request):
        return _create(
            request,
            input_serializer=IssueReportInputSerializer,
            service=services.issue_report_create,
            owner="reporter",
            output_serializer=IssueReportSerializer,
        )


class IssueReportDetail(generics.RetrieveAPIView):
    """One of your own issue reports (moderators see all)."""

    serializer_class = IssueReportSerializer
    permission_classes = [permissions.IsAuthenticated]

    def get_queryset(self):
        return IssueReport.objects.visible_to(self.request.user)


class RunReproductionCreate(generics.GenericAPIView):
    """File a reproduction of one run from the kit's result file (the request body is the file,
    `application/json`, or a multipart `file`), with your API token. Checked on arrival: a
    refused file is a 400 naming the field and what is wrong, and stores nothing. The figures
    are computed from the file's samples; the reproduction waits, pending, for a moderator."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = OwnAttestationSerializer
    parser_classes = []  # the body is read as bytes by the service's checks, never parsed here

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT}, responses={201: OwnAttestationSerializer}
    )
    def post(self, request, run_pk):
        run = get_object_or_404(BenchmarkRun.objects.public(), pk=run_pk)
        if request.content_type.startswith("multipart/"):
            upload = request._request.FILES.get("file")  # reading the form consumes the body
            if upload is None:
                raise serializers.ValidationError(
                    {
                        "file": "No result file: send it as the body (application/json) or as a multipart field named file."
                    }
                )
            content = upload.read()
        else:
            content = request._request.body
        limited = _limited_response(request)
        if limited:
            return limited
        created = _call(services.reproduction_file_submit, run=run, author=request.user, content=content)
        data = OwnAttestationSerializer(created).data
        data["page"] = request.build_absolute_uri(created.get_absolute_url())
        return Response(data, status=status.HTTP_201_CREATED)
