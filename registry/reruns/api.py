"""The jobs API: controlled rerun and measure jobs, read-only."""

from django.shortcuts import get_object_or_404
from django.urls import reverse
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.filters import FormClassOnce, StrictBooleanFilter, WholeNumberFilter
from registry.models import BenchmarkRun
from registry.reruns import fleet
from registry.reruns.models import RerunJob
from registry.reruns.reproduce import run_spec_document
from registry.serializers import JobEvidenceFields


class JobSerializer(JobEvidenceFields, serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # null for a ceilings job, which measures the GPU model rather than a workload
    workload = serializers.CharField(source="workload.summary", read_only=True, allow_null=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    agreement_pct = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = RerunJob
        fields = ["id", *RerunJob.PUBLIC_FIELDS, *JobEvidenceFields.FIELDS, "agreement_pct", "url"]


class JobDetailSerializer(JobSerializer):
    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "samples", "environment", "protocol"]


class JobFilter(FormClassOnce, filters.FilterSet):
    # A whole number: an unknown (or out-of-range) id is an empty list, not a 400 as with
    # ModelChoiceFilter. Filtering `run__id`, not `run_id`, keeps Django's integer range check.
    run = WholeNumberFilter(field_name="run__id")
    result_run = WholeNumberFilter(field_name="result_run__id")
    timed_out = StrictBooleanFilter(
        help_text="true: only jobs killed at their time limit; false: only the others."
    )

    class Meta:
        model = RerunJob
        fields = ["state", "kind", "gpu_slug", "provider", "metric"]


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    """Controlled jobs: state, target GPU model, result and its agreement with the recorded run.
    The list leaves out raw samples and the captured environment; a job's own page has them."""

    queryset = RerunJob.objects.public().order_by("-pk")
    filterset_class = JobFilter

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer


class RunSpecView(APIView):
    """What the reproduction kit runs for one run: the job a controlled rerun would run (kernel,
    implementation, pass, metric, workload), the digests it hashes to, the timing settings, and
    the spec's own digest, which a result file must carry (docs/reproduce.md). Read-only."""

    permission_classes = [permissions.AllowAny]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk):
        run = get_object_or_404(
            BenchmarkRun.objects.public().select_related(
                "kernel", "implementation", "workload", "protocol", "environment"
            ),
            pk=pk,
        )
        return Response(run_spec_document(run, base_url=request.build_absolute_uri("/")))


class FleetAPI(APIView):
    """KernelIndex's physical cards (UUID prefix), each with its jobs and its offset from the
    fleet per verdict class: the median over the class's workloads of its median against the
    other cards' (a relative difference), its distribution-free 95% interval (null ends: too few
    workloads for one) and the number of workloads it rests on. Offsets are never applied."""

    @extend_schema(
        summary="KernelIndex's cards and their offsets",
        responses={(200, "application/json"): OpenApiTypes.OBJECT},
    )
    def get(self, request):
        cards = fleet.fleet()
        return Response(
            {
                "cards": [
                    {
                        "card": card.prefix,
                        "gpu": card.gpu,
                        "measure_jobs": card.measure_jobs,
                        "rerun_jobs": card.rerun_jobs,
                        "url": reverse("jobs:fleet-card", args=[card.prefix]),
                        "offsets": [
                            {
                                "verdict_class": o.key,
                                "class_words": o.words,
                                "offset": o.offset,
                                "low": o.low,
                                "high": o.high,
                                "workloads": o.workloads,
                            }
                            for o in card.offsets
                        ],
                    }
                    for card in cards.values()
                ]
            }
        )
