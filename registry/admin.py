from django.contrib import admin

from registry.job_admin import request_rerun
from registry.models import (
    BenchmarkRun,
    Environment,
    Implementation,
    Kernel,
    Protocol,
    Source,
    SourceImport,
    Workload,
)


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "license", "url"]
    search_fields = ["name", "slug"]


@admin.register(SourceImport)
class SourceImportAdmin(admin.ModelAdmin):
    list_display = [
        "imported_at",
        "source",
        "filename",
        "release",
        "rows",
        "created",
        "unchanged",
        "superseded",
        "withdrawn",
    ]
    list_filter = ["source", "release"]
    search_fields = ["filename", "file_digest"]
    readonly_fields = [f.name for f in SourceImport._meta.fields]


@admin.register(Kernel)
class KernelAdmin(admin.ModelAdmin):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]


@admin.register(Implementation)
class ImplementationAdmin(admin.ModelAdmin):
    list_display = ["provider", "kernel", "project", "revision"]
    list_filter = ["project", "provider", "kernel"]
    search_fields = ["provider", "project", "digest"]
    list_select_related = ["kernel"]


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ["kernel", "summary", "dtype", "x_name"]
    list_filter = ["kernel", "dtype", "x_name"]
    search_fields = ["summary", "slug", "digest"]
    list_select_related = ["kernel"]


@admin.register(Protocol)
class ProtocolAdmin(admin.ModelAdmin):
    list_display = ["name", "timer", "statistic", "comparability_family"]
    list_filter = ["comparability_family", "timer"]
    search_fields = ["name", "digest"]


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ["product", "slug", "vendor", "form_factor", "architecture"]
    list_filter = ["vendor", "architecture", "form_factor"]
    search_fields = ["product", "slug", "digest"]


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "implementation",
        "operation_mode",
        "metric",
        "median",
        "unit",
        "rank",
        "group_size",
        "evidence_level",
        "withdrawn",
    ]
    list_filter = [
        "evidence_level",
        "withdrawn",
        "metric",
        "operation_mode",
        "kernel",
        "environment",
        "source",
    ]
    search_fields = ["external_id", "digest", "comparison_key"]
    list_select_related = ["implementation", "implementation__kernel"]
    actions = [request_rerun]
    raw_id_fields = [
        "superseded_by",
        "first_import",
        "implementation",
        "workload",
        "protocol",
        "environment",
        "kernel",
    ]
    # The evidence level is set by the rerun pipeline alone; moderators never edit it.
    readonly_fields = [
        "evidence_level",
        "digest",
        "comparison_key",
        "rank",
        "group_size",
        "manifest",
        "external_id",
        "upstream_key",
    ]
