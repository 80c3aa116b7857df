"""Moderation in the Django admin: queues for attestations and issue reports, bulk and
per-object decisions, and the audit log. Every decision calls the same service as the API.

Nothing here is edited in place: submissions are the contributors' words, decisions go through
the services, and the audit log is append-only. So change, add and delete are off for everyone.
"""

from datetime import timedelta

from django.apps import apps as django_apps
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from attestations import services
from attestations.forms import ReasonForm
from attestations.models import (
    Attestation,
    AttestationState,
    AuditEntry,
    IssueReport,
    IssueReportState,
)
from attestations.reproduction_files import environment_rows
from registry.admin import AuditedAdminMixin, ReadOnlyAdminMixin, figure, search_with_id
from registry.reruns.admin import has_request_rerun_permission, request_limited
from registry.reruns.services.request import JobRefused


class QueueFilter(admin.SimpleListFilter):
    """A state filter that opens on the queue (what still needs a moderator), with "All"."""

    parameter_name = "state"
    title = "state"
    default = ""
    options: list[tuple[str, str]] = []
    states: dict[str, list[str]] = {}

    def __init__(self, request, params, model, model_admin):
        # A search looks through every state: a run's id finds its decided submissions too.
        self.searching = bool(request.GET.get("q", "").strip())
        super().__init__(request, params, model, model_admin)

    def lookups(self, request, model_admin):
        return self.options

    def current(self) -> str:
        return self.value() or ("all" if self.searching else self.default)

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.current() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request, queryset):
        states = self.states.get(self.current())
        return queryset if states is None else queryset.filter(state__in=states)


class AttestationQueueFilter(QueueFilter):
    default = "pending"
    options = [
        ("pending", "Pending (the queue)"),
        ("approved", "Approved"),
        ("rejected", "Rejected"),
        ("all", "All"),
    ]
    states = {s: [s] for s in AttestationState.values}


class IssueReportQueueFilter(QueueFilter):
    default = "unresolved"
    options = [
        ("unresolved", "Open or acknowledged (the queue)"),
        ("open", "Open"),
        ("acknowledged", "Acknowledged"),
        ("resolved", "Resolved"),
        ("dismissed", "Dismissed"),
        ("all", "All"),
    ]
    states = {
        "unresolved": [IssueReportState.OPEN, IssueReportState.ACKNOWLEDGED],
        **{s: [s] for s in IssueReportState.values},
    }


class AgeFilter(admin.SimpleListFilter):
    title = "waiting for"
    parameter_name = "age"

    def lookups(self, request, model_admin):
        return [("day", "Less than a day"), ("week", "1 to 7 days"), ("older", "More than a week")]

    def queryset(self, request, queryset):
        now = timezone.now()
        day, week = now - timedelta(days=1), now - timedelta(days=7)
        if self.value() == "day":
            return queryset.filter(created_at__gte=day)
        if self.value() == "week":
            return queryset.filter(created_at__lt=day, created_at__gte=week)
        if self.value() == "older":
            return queryset.filter(created_at__lt=week)
        return queryset


class ModerationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Shared by the two queues: read-only objects, decisions as actions and per-object buttons."""

    change_form_template = "attestations/admin/change_form.html"
    perm: str = ""
    # action name → (label, service call, whether the reason is required)
    decisions: dict = {}

    def has_moderate_permission(self, request):
        return request.user.has_perm(self.perm)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<int:object_id>/decide/<str:decision>/",
                self.admin_site.admin_view(self.decide_view),
                name="{}_{}_decide".format(*info),
            ),
            *super().get_urls(),
        ]

    def allowed_decisions(self, obj) -> list[str]:
        raise NotImplementedError

    def decide_view(self, request, object_id, decision):
        """One object, one decision: a page asking for the reason, then the service."""
        if decision not in self.decisions or not self.has_moderate_permission(request):
            raise PermissionDenied
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        change_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk])
        form = ReasonForm(request.POST or None)
        form.fields["reason"].required = self.decisions[decision][2]
        if request.method == "POST" and form.is_valid():
            if self._decide(request, obj, decision, form.cleaned_data["reason"]):
                return redirect(change_url)
        return self._reason_page(request, [obj], decision, form, change_url)

    def _decide(self, request, obj, decision, reason) -> bool:
        call = self.decisions[decision][1]
        try:
            call(obj, request.user, reason)
        except (services.TransitionNotAllowed, ValidationError, PermissionDenied) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            self.message_user(request, f"{obj}: {text}", messages.ERROR)
            return False
        self.message_user(request, f"{obj} is now {obj.get_state_display().lower()}.", messages.SUCCESS)
        return True

    def _bulk(self, request, queryset, decision):
        """The bulk action: first a page asking for the reason, then the service per object.
        The page posts back to the same changelist URL, so its filters select the same rows."""
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        form.fields["reason"].required = self.decisions[decision][2]
        if "apply" in request.POST and form.is_valid():
            for obj in queryset:
                self._decide(request, obj, decision, form.cleaned_data["reason"])
            return None
        return self._reason_page(request, list(queryset), decision, form, None, request.POST["action"])

    def _reason_page(self, request, objects, decision, form, cancel_url, action_name=""):
        context = {
            **self.admin_site.each_context(request),
            "title": f"{self.decisions[decision][0]}: {len(objects)} "
            f"{self.opts.verbose_name if len(objects) == 1 else self.opts.verbose_name_plural}",
            "opts": self.opts,
            "objects": objects,
            "decision": decision,
            "reason_required": self.decisions[decision][2],
            "form": form,
            "bulk": cancel_url is None,
            "action_name": action_name,
            "cancel_url": cancel_url
            or reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "attestations/admin/reason.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = {"audit_entries": [], "decision_buttons": []}
        if obj is not None:
            extra["audit_entries"] = AuditEntry.objects.for_object(obj).select_related("actor")
            if self.has_moderate_permission(request):
                extra["decision_buttons"] = [
                    (
                        self.decisions[d][0],
                        reverse(
                            f"admin:{self.opts.app_label}_{self.opts.model_name}_decide", args=[obj.pk, d]
                        ),
                    )
                    for d in self.allowed_decisions(obj)
                ]
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def get_search_results(self, request, queryset, search_term):
        return search_with_id(super(), request, queryset, search_term, "run_id")

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj):
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        return format_html(
            '<a href="{}?run__id__exact={}&state=all" title="{}">run #{}</a>',
            url,
            obj.run_id,
            obj.run.external_id,
            obj.run_id,
        )

    @admin.display(description="public page")
    def run_page(self, obj):
        return format_html('<a href="{}">{}</a>', obj.run.get_absolute_url(), obj.run.external_id)


# The admin's home leads a moderator to the work: the queues with their counts, stale and unserved
# jobs, and a link to operations (attestations/templatetags/admin_home.py gives the figures).
admin.site.index_template = "admin/moderation_index.html"


@admin.register(Attestation)
class AttestationAdmin(ModerationAdmin):
    perm = services.MODERATE_ATTESTATION
    decisions = {
        "approve": (
            "Approve",
            lambda obj, user, reason: services.attestation_approve(
                attestation=obj, moderator=user, reason=reason
            ),
            False,
        ),
        "reject": (
            "Reject",
            lambda obj, user, reason: services.attestation_reject(
                attestation=obj, moderator=user, reason=reason
            ),
            True,
        ),
    }
    list_display = [
        "id",
        "created_at",
        "kind",
        "origin",
        "state",
        "author",
        "run_link",
        "median_shown",
        "unit",
        "gpu_product",
        "verdict",
    ]
    list_display_links = ["id", "created_at"]
    list_filter = [
        AttestationQueueFilter,
        "kind",
        "origin",
        "verdict",
        AgeFilter,
        ("run__environment", admin.RelatedOnlyFieldListFilter),
        ("author", admin.RelatedOnlyFieldListFilter),
    ]
    list_select_related = ["author", "run"]
    search_fields = ["run__external_id", "author__username", "author__email", "text", "gpu_product"]
    search_hint = "A run's id (1234 or #1234) finds its submissions in every state; or a user, GPU or words."
    ordering = ["created_at", "pk"]
    actions = ["approve_selected", "reject_selected", "rerun_disagreeing"]
    fields = [
        "run_page",
        "kind",
        "origin",
        "state",
        "author",
        "created_at",
        ("median", "p20", "p80", "unit"),
        ("ci_low", "ci_high"),
        ("verdict", "deviation", "deviation_low", "deviation_high"),
        "verdict_note",
        "file_checks",
        "environments",
        "gpu_product",
        ("driver_version", "cuda_version", "torch_version", "triton_version", "liger_version"),
        "harness",
        "links_shown",
        "text",
        "rejection_reason",
        ("decided_by", "decided_at"),
    ]
    readonly_fields = [name for item in fields for name in ((item,) if isinstance(item, str) else item)]

    def allowed_decisions(self, obj):
        return [
            decision
            for decision, state in (
                ("approve", AttestationState.APPROVED),
                ("reject", AttestationState.REJECTED),
            )
            if obj.state in services.ATTESTATION_TRANSITIONS[state]
        ]

    @admin.action(description="Approve selected attestations", permissions=["moderate"])
    def approve_selected(self, request, queryset):
        return self._bulk(request, queryset, "approve")

    @admin.action(description="Reject selected attestations (with a reason)", permissions=["moderate"])
    def reject_selected(self, request, queryset):
        return self._bulk(request, queryset, "reject")

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request) and self.has_moderate_permission(request)

    @admin.action(
        description="Request a rerun of the run (data-bearing reproductions that disagree)",
        permissions=["request_rerun"],
    )
    def rerun_disagreeing(self, request, queryset):
        limited = request_limited(request)
        if limited:
            return limited
        for attestation in queryset.select_related("run"):
            try:
                job = services.reproduction_rerun_request(attestation=attestation, moderator=request.user)
            except (JobRefused, PermissionDenied) as exc:
                self.message_user(request, f"{attestation}: {exc}", messages.WARNING)
                continue
            self.message_user(request, f"{attestation}: rerun job #{job.pk} queued.", messages.SUCCESS)
        return None

    @admin.display(description="median", ordering="median")
    def median_shown(self, obj):
        return figure(obj.median)

    @admin.display(description="links")
    def links_shown(self, obj):
        if not obj.links:
            return "—"
        return format_html_join(
            mark_safe("<br>"),
            '<a href="{}" rel="nofollow noopener">{}</a>',
            ((link, link) for link in obj.links),
        )

    @admin.display(description="checks of the result file")
    def file_checks(self, obj):
        if not obj.carries_data:
            return "Typed into the form: nothing to check."
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((c["check"], "passed" if c["passed"] else "no", c["detail"]) for c in obj.checks),
        )
        return format_html("<table><tr><th>check</th><th>result</th><th>detail</th></tr>{}</table>", rows)

    @admin.display(description="environments (run / contributor)")
    def environments(self, obj):
        if not obj.carries_data:
            return "Typed: only the versions below."
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", environment_rows(obj.run, obj.environment)
        )
        return format_html(
            "<table><tr><th></th><th>the run</th><th>the contributor</th></tr>{}</table>", rows
        )


@admin.register(IssueReport)
class IssueReportAdmin(ModerationAdmin):
    perm = services.TRIAGE_REPORT
    decisions = {
        state: (
            label,
            lambda obj, user, reason, state=state: services.issue_report_transition(
                report=obj, moderator=user, to_state=state, resolution=reason
            ),
            state in services.REPORT_STATES_NEEDING_RESOLUTION,
        )
        for state, label in (
            (IssueReportState.ACKNOWLEDGED, "Acknowledge"),
            (IssueReportState.RESOLVED, "Resolve"),
            (IssueReportState.DISMISSED, "Dismiss"),
        )
    }
    list_display = ["id", "created_at", "category", "state", "reporter_name", "run_link"]
    list_display_links = ["id", "created_at"]
    list_filter = [
        IssueReportQueueFilter,
        "category",
        AgeFilter,
        ("run__environment", admin.RelatedOnlyFieldListFilter),
        ("reporter", admin.RelatedOnlyFieldListFilter),
    ]
    list_select_related = ["reporter", "run"]
    search_fields = ["run__external_id", "reporter__username", "reporter__email", "description"]
    search_hint = "A run's id (1234 or #1234) finds its reports in every state; or a user or words."
    ordering = ["created_at", "pk"]
    actions = ["acknowledge_selected", "resolve_selected", "dismiss_selected"]
    fields = [
        "run_page",
        "category",
        "state",
        "reporter_name",
        "created_at",
        "updated_at",
        "description",
        "resolution",
    ]
    readonly_fields = fields

    def allowed_decisions(self, obj):
        return sorted(services.REPORT_TRANSITIONS.get(obj.state, set()), key=list(self.decisions).index)

    @admin.display(description="reporter", ordering="reporter__username")
    def reporter_name(self, obj):
        return obj.reporter.get_username() if obj.reporter else "KernelIndex (system)"

    @admin.action(description="Acknowledge selected reports", permissions=["moderate"])
    def acknowledge_selected(self, request, queryset):
        return self._bulk(request, queryset, IssueReportState.ACKNOWLEDGED)

    @admin.action(description="Resolve selected reports (with a resolution)", permissions=["moderate"])
    def resolve_selected(self, request, queryset):
        return self._bulk(request, queryset, IssueReportState.RESOLVED)

    @admin.action(description="Dismiss selected reports (with a reason)", permissions=["moderate"])
    def dismiss_selected(self, request, queryset):
        return self._bulk(request, queryset, IssueReportState.DISMISSED)


class AuditTypeFilter(admin.SimpleListFilter):
    """The kinds of object the log holds entries about, not every model the site has."""

    title = "about"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        held = AuditEntry.objects.order_by().values_list("content_type", flat=True).distinct()
        types = ContentType.objects.filter(pk__in=held)
        choices = (
            (
                str(ct.pk),
                str(ct.model_class()._meta.verbose_name).capitalize() if ct.model_class() else ct.model,
            )
            for ct in types
        )
        return sorted(choices, key=lambda item: item[1])

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(content_type_id=int(value)) if value and value.isdigit() else queryset


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only for everyone, superusers included: the log is never edited nor deleted."""

    list_display = ["created_at", "actor_name", "action", "object_link", "from_state", "to_state", "reason"]
    list_filter = ["action", AuditTypeFilter, "created_at"]
    search_fields = ["object_repr", "reason", "actor__username"]
    list_select_related = ["actor", "content_type"]
    date_hierarchy = "created_at"
    fields = ["created_at", "actor_name", "action", "object_link", "from_state", "to_state", "reason"]
    readonly_fields = fields

    @admin.display(description="actor", ordering="actor__username")
    def actor_name(self, obj):
        return obj.actor.get_username() if obj.actor else "KernelIndex (system)"

    @admin.display(description="object", ordering="object_repr")
    def object_link(self, obj):
        ct = obj.content_type
        try:
            url = reverse(f"admin:{ct.app_label}_{ct.model}_change", args=[obj.object_id])
        except NoReverseMatch:
            return obj.object_repr
        return format_html('<a href="{}">{}</a>', url, obj.object_repr)


# --- the other apps' admins ------------------------------------------------------------------
OUR_APPS = {"registry", "reruns", "attestations"}


def third_party_admins_audit(site: admin.AdminSite = admin.site) -> None:
    """Every model another app shows in the admin (auth's users and groups, sites, API tokens,
    allauth's e-mail addresses and social accounts) is audited as ours are: a superuser's add,
    edit, delete or action there (giving someone the moderators' group, say) is in the audit log
    with its actor, in the change's transaction. Each admin is re-registered as a subclass of its
    own with AuditedAdminMixin, through the site's public API. Re-registered, they come after
    ours: the admin's pages list apps and models by name, and only the app-index URL pattern's
    alternation of app labels follows the order (tests/security/authz_matrix.py names it). This
    module is the last of the apps' admins Django imports."""
    for model in django_apps.get_models():
        if model._meta.app_label in OUR_APPS or not site.is_registered(model):
            continue
        model_admin = site.get_model_admin(model)
        if isinstance(model_admin, AuditedAdminMixin):
            continue
        body = {"__module__": __name__}
        if model._meta.label == "authtoken.TokenProxy":
            body["audit_target"] = lambda self, token: (token.user, f"API token of {token.user}")
        audited = type(f"Audited{type(model_admin).__name__}", (AuditedAdminMixin, type(model_admin)), body)
        site.unregister(model)
        site.register(model, audited)


third_party_admins_audit()
