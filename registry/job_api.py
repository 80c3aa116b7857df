"""The jobs API: controlled rerun and measure jobs, read-only."""

from rest_framework import serializers, viewsets

from registry.models import RerunJob


class JobSerializer(serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    workload = serializers.CharField(source="workload.summary", read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    agreement_pct = serializers.FloatField(read_only=True)

    class Meta:
        model = RerunJob
        fields = [
            "id",
            "kind",
            "state",
            "run",
            "result_run",
            "kernel",
            "provider",
            "workload",
            "operation_mode",
            "metric",
            "gpu_slug",
            "worker_gpu",
            "attempts",
            "created_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
            "unit",
            "median",
            "p20",
            "p80",
            "ci_low",
            "ci_high",
            "tolerance",
            "deviation",
            "agreement_pct",
            "error",
            "url",
        ]


class JobDetailSerializer(JobSerializer):
    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "samples", "environment", "protocol"]


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    """Controlled jobs: state, target GPU model, result and its agreement with the recorded run.
    The list leaves out raw samples and the captured environment; a job's own page has them."""

    queryset = RerunJob.objects.public().order_by("-pk")
    filterset_fields = ["state", "kind", "run", "result_run", "gpu_slug", "provider", "metric"]

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer
