from django.contrib import admin
from django.db import transaction

from attestations.audit import audit_record
from registry.cache import generation_bump
from registry.models import (
    BenchmarkRun,
    Environment,
    Implementation,
    Kernel,
    Protocol,
    Source,
    SourceImport,
    SourceSync,
    Workload,
)


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


class AuditedAdminMixin:
    """For records staff may edit here: the admin's save or delete is a change a public page shows,
    so it is recorded in the audit log with its actor and the fields it changed, and bumps the page
    cache's generation, as a service does (registry/cache.py), in one transaction. Every other
    action the admin offers (a third-party one, such as allauth's "mark as verified") records an
    entry for each selected row in the action's transaction. `audit_target` says what the entry is
    about where a row cannot stand for itself (an API token: its key is its primary key and its
    text, neither of which belongs in the log; the entry is about its user)."""

    def audit_target(self, obj) -> tuple:
        """(the row the entry is about, how the log names it)."""
        return obj, str(obj)

    def _audit(self, request, obj, action: str, reason: str = "") -> None:
        target, label = self.audit_target(obj)
        audit_record(actor=request.user, target=target, action=action, reason=reason, label=label)

    def save_model(self, request, obj, form, change):
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            changed = ", ".join(form.changed_data) if change else ""
            self._audit(
                request,
                obj,
                "edited" if change else "added",
                f"Changed in the admin: {changed}" if changed else "",
            )
            generation_bump()

    def delete_model(self, request, obj):
        with transaction.atomic():
            self._audit(request, obj, "deleted")
            super().delete_model(request, obj)
            generation_bump()

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                self._audit(request, obj, "deleted")
            super().delete_queryset(request, queryset)
            generation_bump()

    def get_actions(self, request):
        actions = super().get_actions(request)
        return {
            name: (func if name == "delete_selected" else self._audited_action(func, name), name, description)
            for name, (func, _, description) in actions.items()
        }

    def _audited_action(self, func, name: str):
        """`delete_selected` audits through delete_queryset; any other action is wrapped here."""

        def audited(modeladmin, request, queryset):
            with transaction.atomic():
                for obj in queryset:
                    self._audit(request, obj, f"admin action: {name}")
                response = func(modeladmin, request, queryset)
                generation_bump()
            return response

        return audited


class AuditedAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """A ModelAdmin of ours whose saves, deletes and actions are audited (AuditedAdminMixin)."""


@admin.register(Source)
class SourceAdmin(PublishedRecordAdmin):
    """Read-only: a source's licence and terms are printed on every run page and in every
    manifest, so they change only with an import of the source."""

    list_display = ["name", "slug", "license", "url"]
    search_fields = ["name", "slug"]


@admin.register(SourceImport)
class SourceImportAdmin(PublishedRecordAdmin):
    """Read-only and no add page: imports are made by `import_liger`, the history and syncs."""

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
class KernelAdmin(AuditedAdmin):
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


@admin.register(Environment)
class EnvironmentAdmin(PublishedRecordAdmin):
    list_display = ["product", "slug", "vendor", "form_factor", "architecture"]
    list_filter = ["vendor", "architecture", "form_factor"]
    search_fields = ["product", "slug", "digest"]


def figure(value, digits: int = 4) -> str:
    """A float as a person reads it: four significant digits (144.2, not 144.2132110595703)."""
    return "—" if value is None else f"{value:.{digits}g}"


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(PublishedRecordAdmin):
    list_display = [
        "short_id",
        "implementation",
        "operation_mode",
        "metric",
        "median_shown",
        "unit",
        "rank",
        "group_size",
        "evidence_level",
        "withdrawn",
        "sol_shown",
        "implausible",
    ]
    list_display_links = ["short_id"]
    # `implausible`: runs faster than their GPU's speed of light, for a moderator to look into and
    # rerun (the request_rerun action, which the reruns app adds); their evidence level stays.
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
    search_hint = "A run's id (1234 or #1234), or part of its external id, digest or comparison key."
    list_select_related = ["implementation", "implementation__kernel"]
    raw_id_fields = [
        "superseded_by",
        "first_import",
        "implementation",
        "workload",
        "protocol",
        "environment",
        "kernel",
    ]

    @admin.display(description="run", ordering="pk")
    def short_id(self, obj):
        return f"#{obj.pk}"

    @admin.display(description="median", ordering="median")
    def median_shown(self, obj):
        return figure(obj.median)

    @admin.display(description="% of speed of light", ordering="sol_percent")
    def sol_shown(self, obj):
        return "—" if obj.sol_percent is None else f"{obj.sol_percent:.1f}%"

    def get_search_results(self, request, queryset, search_term):
        return search_with_id(super(), request, queryset, search_term, "pk")


def search_with_id(admin_super, request, queryset, search_term, field: str):
    """The admin's search, plus the run whose id the term is: "#1234" is that run alone, "1234"
    that run and whatever else the text matches (a hidden size of 4096, say)."""
    term = search_term.strip()
    if term.startswith("#") and term[1:].isdigit() and len(term) < 19:
        return queryset.filter(**{field: int(term[1:])}), False
    found, duplicates = admin_super.get_search_results(request, queryset, search_term)
    if term.isdigit() and len(term) < 19:
        found = found | queryset.filter(**{field: int(term)})
    return found, duplicates


# Operations: upstream syncs, and what needs a moderator's or an operator's eye (docs/deploy.md).


@admin.register(SourceSync)
class SourceSyncAdmin(AuditedAdmin):
    """Read-only rows; a superuser may still delete them, and that is recorded like any admin change."""

    list_display = ["started_at", "source_slug", "release", "status", "finished_at", "notified_at"]
    list_filter = ["status", "source_slug"]
    search_fields = ["release", "archive_digest", "error"]
    readonly_fields = [f.name for f in SourceSync._meta.fields]

    def has_add_permission(self, request):
        return False  # `manage.py sync_liger` or the beat task make these
