"""The read API: kernels, implementations, environments, sources, runs, comparison groups,
manifests, and the bulk export. Read-only viewsets over the public querysets; the run filters
are the site's (`registry.filters.RunFilter`), so a bad value is a 400 naming the parameter.
"""

import hashlib
import json

from django.db.models import Count, OuterRef, Prefetch, Subquery
from django.http import HttpResponse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, renderers, viewsets
from rest_framework.decorators import action
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import digests, evidence, exports, run_page, selectors
from registry.cache import CachedReadMixin
from registry.filters import MAX_VALUE_LENGTH, FormClassOnce, RunFilter
from registry.models import (
    BenchmarkRun,
    Environment,
    EvidenceLevel,
    Implementation,
    Kernel,
    Metric,
    Source,
    SourceImport,
    TimedPass,
)
from registry.serializers import (
    ComparisonGroupDetailSerializer,
    ComparisonGroupSerializer,
    EnvironmentSerializer,
    ImplementationSerializer,
    KernelSerializer,
    RunSerializer,
    SourceSerializer,
)

DIGEST_PATTERN = r"sha256:[0-9a-f]{64}"


def conditional(request, *, etag: str, last_modified, build) -> HttpResponse:
    """A 304 when the client's validators still match; otherwise `build()` with ETag and
    Last-Modified set."""
    timestamp = int(last_modified.timestamp())
    not_modified = get_conditional_response(request, etag=etag, last_modified=timestamp)
    if not_modified is not None:
        return not_modified
    response = build()
    response["ETag"] = etag
    response["Last-Modified"] = http_date(timestamp)
    return response


def manifest_response(request, run: BenchmarkRun) -> HttpResponse:
    """The canonical manifest: its bytes never change, so its digest is a strong ETag."""
    return conditional(
        request,
        etag=f'"{run.digest.removeprefix("sha256:")}"',
        last_modified=run.published_at,
        build=lambda: HttpResponse(digests.canonical_bytes(run.manifest), content_type="application/json"),
    )


@extend_schema_view(
    list=extend_schema(summary="List runs", description="Filters match the site's kernel and run pages."),
    retrieve=extend_schema(
        summary="One run", description="With ETag and Last-Modified; honours If-None-Match."
    ),
)
class RunViewSet(CachedReadMixin, viewsets.ReadOnlyModelViewSet):
    """Benchmark runs, each with its rank in its comparison group and its digest."""

    queryset = BenchmarkRun.objects.public().order_by("pk")
    serializer_class = RunSerializer
    filterset_class = RunFilter
    lookup_value_regex = r"[0-9]{1,18}"
    # The list shows no manifest and no spec document, yet they are most of each row's bytes
    # (about 11 kB of JSON per run with its joined specs): left in the database (bench/, docs/performance.md).
    LIST_DEFERRED = (
        "manifest",
        "implementation__spec",
        "workload__spec",
        "workload__tensors",
        "protocol__spec",
        "protocol__notes",
        "environment__spec",
        "environment__software",
        "source__description",
    )

    def get_queryset(self):
        runs = super().get_queryset()
        if self.action == "list":
            runs = evidence.with_jobs(runs.defer(*self.LIST_DEFERRED))
        if self.action == "retrieve":
            # Ranks are recomputed in bulk at each import without touching updated_at, so the
            # source's latest import also bounds when this run's representation last changed.
            latest = SourceImport.objects.filter(source=OuterRef("source")).order_by("-imported_at")
            runs = runs.annotate(source_imported_at=Subquery(latest.values("imported_at")[:1]))
        return runs

    def retrieve(self, request, *args, **kwargs):
        # The run page's read model: the run's standing, jobs and evidence, read once.
        page = run_page.run_page_of(self.get_object())
        run = page.run
        data = self.get_serializer(run, context={**self.get_serializer_context(), "run_page": page}).data
        body = json.dumps(data, sort_keys=True, default=str).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:40] + '"'
        last_modified = max(
            filter(None, [run.updated_at, run.published_at, run.withdrawn_at, run.source_imported_at])
        )
        return conditional(request, etag=etag, last_modified=last_modified, build=lambda: Response(data))

    @extend_schema(
        summary="The run's canonical manifest",
        description="RFC 8785 bytes; their sha256 is the run's digest. ETag is the digest.",
        responses={(200, "application/json"): OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"])
    def manifest(self, request, pk=None, format=None):
        return manifest_response(request, self.get_object())


class ManifestViewSet(CachedReadMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Canonical manifests, looked up by the run digest they hash to."""

    page_cache_versioned = False  # the digest names these exact bytes: no registry change alters them

    queryset = BenchmarkRun.objects.only("id", "digest", "manifest", "published_at")
    lookup_field = "digest"
    lookup_value_regex = DIGEST_PATTERN
    serializer_class = None
    pagination_class = None

    @extend_schema(
        summary="A manifest by its digest",
        responses={(200, "application/json"): OpenApiTypes.OBJECT},
    )
    def retrieve(self, request, *args, **kwargs):
        return manifest_response(request, self.get_object())


class KernelViewSet(CachedReadMixin, viewsets.ReadOnlyModelViewSet):
    queryset = (
        Kernel.objects.annotate(run_count=Count("runs"))
        .prefetch_related(
            Prefetch("implementations", queryset=Implementation.objects.only("kernel", "provider"))
        )
        .order_by("slug")
    )
    serializer_class = KernelSerializer
    lookup_field = "slug"


class ImplementationFilter(FormClassOnce, filters.FilterSet):
    kernel = filters.CharFilter(field_name="kernel__slug")
    provider = filters.CharFilter()
    project = filters.CharFilter()
    digest = filters.CharFilter()

    class Meta:
        model = Implementation
        fields = []


class ImplementationViewSet(CachedReadMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Implementation.objects.select_related("kernel").order_by("kernel__slug", "provider", "pk")
    serializer_class = ImplementationSerializer
    filterset_class = ImplementationFilter
    lookup_value_regex = r"[0-9]{1,18}"


class EnvironmentFilter(FormClassOnce, filters.FilterSet):
    gpu = filters.CharFilter(field_name="slug")
    vendor = filters.CharFilter()
    architecture = filters.CharFilter()
    digest = filters.CharFilter()

    class Meta:
        model = Environment
        fields = []


class EnvironmentViewSet(CachedReadMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Environment.objects.order_by("product", "pk")
    serializer_class = EnvironmentSerializer
    filterset_class = EnvironmentFilter
    lookup_value_regex = r"[0-9]{1,18}"


class SourceViewSet(CachedReadMixin, viewsets.ReadOnlyModelViewSet):
    queryset = (
        Source.objects.annotate(run_count=Count("runs"))
        .prefetch_related(Prefetch("imports", queryset=SourceImport.objects.order_by("-imported_at", "-pk")))
        .order_by("slug")
    )
    serializer_class = SourceSerializer
    lookup_field = "slug"


class GroupFilter(FormClassOnce, filters.FilterSet):
    kernel = filters.CharFilter(field_name="kernel__slug")
    gpu = filters.CharFilter(field_name="environment__slug")
    operation_mode = filters.ChoiceFilter(choices=TimedPass.choices)
    metric = filters.ChoiceFilter(choices=Metric.choices)

    class Meta:
        model = BenchmarkRun
        fields = []


class ComparisonGroupViewSet(CachedReadMixin, viewsets.GenericViewSet):
    """Comparison groups: current runs sharing one comparison key, ranked (1 = best)."""

    serializer_class = ComparisonGroupSerializer
    filterset_class = GroupFilter
    lookup_field = "comparison_key"
    lookup_value_regex = DIGEST_PATTERN

    def get_queryset(self):
        return selectors.comparison_groups()

    def list(self, request, format=None):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(ComparisonGroupSerializer(page, many=True).data)

    @extend_schema(responses=ComparisonGroupDetailSerializer)
    def retrieve(self, request, comparison_key=None, format=None):
        group = self.get_queryset().filter(comparison_key=comparison_key).first()
        if group is None:
            raise exceptions.NotFound("No comparison group has this key.")
        group["runs"] = evidence.with_jobs(
            BenchmarkRun.objects.public()
            .current()
            .filter(comparison_key=comparison_key)
            .order_by("rank", "median", "pk")
        )
        return Response(ComparisonGroupDetailSerializer(group).data)


class PassthroughRenderer(renderers.BaseRenderer):
    """Lets a client ask for CSV or JSON Lines; the streamed body is written by the view, and
    errors (400, 429) still go out as JSON."""

    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode() if data is not None else b""


class CSVRenderer(PassthroughRenderer):
    media_type = "text/csv"
    format = "csv"


class JSONLinesRenderer(PassthroughRenderer):
    media_type = "application/jsonl"
    format = "jsonl"


EXPORT_TEXT = {"type": "string", "maxLength": MAX_VALUE_LENGTH, "pattern": "^[^\\x00]*$"}
EXPORT_PARAMETERS = [
    OpenApiParameter(
        name,
        EXPORT_TEXT if choices is None else OpenApiTypes.STR,
        description=f"As on /api/v1/runs/: {name}.",
        enum=choices,
    )
    for name, choices in (
        ("kernel", None),
        ("implementation", None),
        ("project", None),
        ("gpu", None),
        ("operation_mode", TimedPass.values),
        ("metric", Metric.values),
        ("evidence_level", EvidenceLevel.values),
    )
] + [
    # The download is CSV or JSON Lines whatever is asked (FirstRendererNegotiation): no format.
    OpenApiParameter("format", OpenApiTypes.STR, exclude=True)
]


class FirstRendererNegotiation(BaseContentNegotiation):
    """A download link answers whatever the client's Accept header says: the body is CSV or
    JSON Lines, and an error is JSON."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class _ExportView(APIView):
    pagination_class = None
    content_negotiation_class = FirstRendererNegotiation

    def runs(self, request):
        filterset = RunFilter(request.query_params, queryset=BenchmarkRun.objects.public())
        if not filterset.is_valid():
            raise exceptions.ValidationError(filterset.errors)
        return filterset.qs


class RunExportCSV(_ExportView):
    """Every public run matching the filters, as CSV, streamed."""

    renderer_classes = [renderers.JSONRenderer, CSVRenderer]

    @extend_schema(
        summary="Export runs as CSV",
        parameters=EXPORT_PARAMETERS,
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request):
        return exports.csv_response(self.runs(request))


class RunExportJSONLines(_ExportView):
    """Every public run matching the filters, as JSON Lines: one canonical manifest per line."""

    renderer_classes = [renderers.JSONRenderer, JSONLinesRenderer]

    @extend_schema(
        summary="Export manifests as JSON Lines",
        parameters=EXPORT_PARAMETERS,
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
    )
    def get(self, request):
        return exports.jsonl_response(self.runs(request))
