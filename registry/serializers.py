"""Output serializers of the read API. Field names are part of the API contract: add, never rename."""

from django.urls import reverse
from rest_framework import serializers

from registry.models import BenchmarkRun, Environment, Implementation, Kernel, Source, SourceImport


class RunSerializer(serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    implementation = serializers.CharField(source="implementation.provider", read_only=True)
    project = serializers.CharField(source="implementation.project", read_only=True)
    gpu = serializers.CharField(source="environment.slug", read_only=True)
    gpu_product = serializers.CharField(source="environment.product", read_only=True)
    workload = serializers.CharField(source="workload.summary", read_only=True)
    workload_parameters = serializers.JSONField(source="workload.parameters", read_only=True)
    workload_digest = serializers.CharField(source="workload.digest", read_only=True)
    dtype = serializers.CharField(source="workload.dtype", read_only=True)
    source = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    manifest_url = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkRun
        fields = [
            "id",
            "external_id",
            "kernel",
            "implementation",
            "project",
            "gpu",
            "gpu_product",
            "workload",
            "workload_parameters",
            "workload_digest",
            "dtype",
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
            "source",
            "published_at",
            "url",
            "manifest_url",
        ]

    def get_manifest_url(self, run) -> str:
        return reverse("manifest-detail", args=[run.digest])


class KernelSerializer(serializers.ModelSerializer):
    run_count = serializers.IntegerField(read_only=True)
    implementations = serializers.SerializerMethodField()
    url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Kernel
        fields = ["slug", "name", "description", "run_count", "implementations", "url"]

    def get_implementations(self, kernel) -> list[str]:
        return sorted({i.provider for i in kernel.implementations.all()})


class ImplementationSerializer(serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Implementation
        fields = [
            "id",
            "kernel",
            "provider",
            "project",
            "project_url",
            "revision",
            "description",
            "digest",
            "spec",
        ]


class EnvironmentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Environment
        fields = [
            "id",
            "slug",
            "vendor",
            "product",
            "form_factor",
            "architecture",
            "software",
            "digest",
            "spec",
        ]


class SourceImportSerializer(serializers.ModelSerializer):
    class Meta:
        model = SourceImport
        fields = [
            "filename",
            "file_digest",
            "release",
            "imported_at",
            "rows",
            "created",
            "unchanged",
            "superseded",
            "withdrawn",
            "restored",
        ]


class SourceSerializer(serializers.ModelSerializer):
    imports = SourceImportSerializer(many=True, read_only=True)
    run_count = serializers.IntegerField(read_only=True)
    page = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Source
        fields = [
            "slug",
            "name",
            "url",
            "license",
            "license_url",
            "description",
            "run_count",
            "imports",
            "page",
        ]


class ComparisonGroupSerializer(serializers.Serializer):
    """A comparison group: the current runs that share one comparison key."""

    comparison_key = serializers.CharField()
    kernel = serializers.CharField(source="kernel__slug")
    operation_mode = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    gpu = serializers.CharField(source="environment__slug")
    gpu_product = serializers.CharField(source="environment__product")
    workload = serializers.CharField(source="workload__summary")
    workload_digest = serializers.CharField(source="workload__digest")
    comparability_family = serializers.CharField(source="protocol__comparability_family")
    size = serializers.IntegerField()
    best = serializers.FloatField(help_text="The best (lowest) median of the group.")
    url = serializers.SerializerMethodField()

    def get_url(self, group) -> str:
        return reverse("comparison-group-detail", args=[group["comparison_key"]])


class ComparisonGroupDetailSerializer(ComparisonGroupSerializer):
    runs = RunSerializer(many=True, help_text="The group's runs, best first.")
