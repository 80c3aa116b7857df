from rest_framework import serializers

from registry.models import BenchmarkRun


class RunSerializer(serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    implementation = serializers.CharField(source="implementation.provider", read_only=True)
    project = serializers.CharField(source="implementation.project", read_only=True)
    gpu = serializers.CharField(source="environment.slug", read_only=True)
    workload = serializers.CharField(source="workload.summary", read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = BenchmarkRun
        fields = [
            "id",
            "external_id",
            "kernel",
            "implementation",
            "project",
            "gpu",
            "workload",
            "operation_mode",
            "metric",
            "unit",
            "median",
            "p20",
            "p80",
            "source_metrics",
            "observed_at",
            "rank",
            "group_size",
            "comparison_key",
            "digest",
            "evidence_level",
            "withdrawn",
            "withdrawn_at",
            "superseded_by",
            "url",
        ]
