from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils import timezone

from registry.cache import generation_bump
from registry.models import (
    BenchmarkRun,
    Environment,
    Implementation,
    JobState,
    Kernel,
    MeasuredCeiling,
    Protocol,
    RerunJob,
    Source,
    SourceImport,
    SourceSync,
    Workload,
)
from registry.reruns.admin import has_request_rerun_permission, request_rerun
from registry.reruns.services import JobRefused, ceilings_request
from registry.services.sync import syncs_stuck


class ReadOnlyAdminMixin:
    """No add, change or delete in the admin, for anyone, superusers included: such rows change
    through services only (published records, the moderation queues, the audit log)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class PublishedRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only for everyone, superusers included. A run's measurements, workload, protocol and
    environment are what its digest and manifest certify, its rank follows from them, and
    withdrawal and supersession are the importer's: an edit here would show a figure the digest
    does not cover. Corrections are new runs (the importer, or a controlled run); the evidence
    level is the rerun pipeline's alone."""


class PageCacheAdmin(admin.ModelAdmin):
    """For records staff may edit here: the admin's save or delete is a change a public page shows,
    so it bumps the page cache's generation, as a service does (registry/cache.py)."""

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        generation_bump()

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        generation_bump()

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        generation_bump()


@admin.register(Source)
class SourceAdmin(PageCacheAdmin):
    list_display = ["name", "slug", "license", "url"]
    search_fields = ["name", "slug"]


@admin.register(SourceImport)
class SourceImportAdmin(PageCacheAdmin):
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
class KernelAdmin(PageCacheAdmin):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]


@admin.register(Implementation)
class ImplementationAdmin(PublishedRecordAdmin):
    list_display = ["provider", "kernel", "project", "revision"]
    list_filter = ["project", "provider", "kernel"]
    search_fields = ["provider", "project", "digest"]
    list_select_related = ["kernel"]


@admin.register(Workload)
class WorkloadAdmin(PublishedRecordAdmin):
    list_display = ["kernel", "summary", "dtype", "x_name"]
    list_filter = ["kernel", "dtype", "x_name"]
    search_fields = ["summary", "slug", "digest"]
    list_select_related = ["kernel"]


@admin.register(Protocol)
class ProtocolAdmin(PublishedRecordAdmin):
    list_display = ["name", "timer", "statistic", "comparability_family"]
    list_filter = ["comparability_family", "timer"]
    search_fields = ["name", "digest"]


@admin.action(
    description="Measure the ceilings of these GPU models (copy and bf16 GEMM)", permissions=["request_rerun"]
)
def request_ceilings(modeladmin, request, queryset):
    for slug in sorted(set(queryset.values_list("slug", flat=True))):
        try:
            job = ceilings_request(
                gpu_slug=slug, requested_by=request.user, reason="requested from the admin"
            )
        except JobRefused as exc:
            modeladmin.message_user(request, str(exc), messages.WARNING)
        else:
            modeladmin.message_user(request, f"Ceilings job #{job.pk} queued for {slug}.")


@admin.register(Environment)
class EnvironmentAdmin(PublishedRecordAdmin):
    list_display = ["product", "slug", "vendor", "form_factor", "architecture"]
    list_filter = ["vendor", "architecture", "form_factor"]
    search_fields = ["product", "slug", "digest"]
    actions = [request_ceilings]

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request)


@admin.register(MeasuredCeiling)
class MeasuredCeilingAdmin(admin.ModelAdmin):
    list_display = ["gpu_slug", "measured_at", "memory_bandwidth", "bf16_tflops", "job"]
    list_filter = ["gpu_slug"]
    readonly_fields = [f.name for f in MeasuredCeiling._meta.fields]

    def has_add_permission(self, request):
        return False  # a ceilings job or `manage.py measure_ceilings` makes these

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(PublishedRecordAdmin):
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
        "sol_percent",
        "implausible",
    ]
    # `implausible`: runs faster than their GPU's speed of light, for a moderator to look into and
    # rerun (the request_rerun action); their evidence level stays as it is.
    list_filter = [
        "implausible",
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

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request)


# Operations: upstream syncs, and what needs a moderator's or an operator's eye (docs/deploy.md).


@admin.register(SourceSync)
class SourceSyncAdmin(admin.ModelAdmin):
    list_display = ["started_at", "source_slug", "release", "status", "finished_at", "notified_at"]
    list_filter = ["status", "source_slug"]
    search_fields = ["release", "archive_digest", "error"]
    readonly_fields = [f.name for f in SourceSync._meta.fields]

    def has_add_permission(self, request):
        return False  # `manage.py sync_liger` or the beat task make these


def operations_view(request):
    """/admin/operations/: the last sync, jobs stuck or failed in the last day, and GPU queues
    that have work but no live worker."""
    context = {**admin.site.each_context(request), "title": "Operations", **operations_summary()}
    return TemplateResponse(request, "admin/operations.html", context)


def operations_summary(*, now=None) -> dict:
    now = now or timezone.now()
    return {
        "last_sync": SourceSync.objects.first(),
        "last_imports": SourceImport.objects.select_related("source")[:10],
        "stuck_syncs": syncs_stuck(),
        **_jobs_needing_attention(now),
    }


def _jobs_needing_attention(now) -> dict:
    day_ago = now - timedelta(days=1)
    waiting_too_long = now - timedelta(seconds=settings.JOB_RESEND_AFTER)
    jobs = RerunJob.objects.select_related("kernel").order_by("-created_at")
    active_queues = sorted({f"gpu.{slug}" for slug in jobs.active().values_list("gpu_slug", flat=True)})
    failed = jobs.filter(state__in=[JobState.FAILED, JobState.DIVERGED], finished_at__gte=day_ago)
    # Stuck: what the reconciler takes from its worker (RerunJob.objects.lost), or a queued job
    # nobody has claimed since well before the reconciler's resend.
    stuck = jobs.lost(now) | jobs.filter(state=JobState.QUEUED, created_at__lt=waiting_too_long)
    live, inspect_error = live_worker_queues()
    return {
        "failed_jobs": failed[:50],
        "stuck_jobs": stuck[:50],
        "queues_without_worker": [q for q in active_queues if q not in live],
        "live_queues": sorted(live),
        "inspect_error": inspect_error,
    }


def live_worker_queues() -> tuple[set[str], str]:
    """The queues some live Celery worker consumes, by asking the workers over the broker.
    Returns (queues, "") or (set(), why the workers could not be asked)."""
    from kernelindex.celery import app

    try:
        answers = app.control.inspect(timeout=settings.OPERATIONS_INSPECT_TIMEOUT).active_queues() or {}
    except Exception as exc:  # a broker that is down, or one without broadcast (filesystem)
        return set(), f"{type(exc).__name__}: {exc}"
    return {queue["name"] for queues in answers.values() for queue in queues}, ""
