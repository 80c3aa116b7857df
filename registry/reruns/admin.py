"""Moderators' controls for controlled runs: the "Request rerun" action on runs, the job list,
and the form that queues measure jobs. Every change goes through registry.reruns.services."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import escape

from attestations.ratelimit import limit_consume
from registry import admin as registry_admin
from registry.admin import search_with_id
from registry.models import BenchmarkRun, Environment, Implementation, Kernel, Metric, TimedPass, Workload
from registry.reruns.models import JobState, MeasuredCeiling, RerunJob, WorkerKey
from registry.reruns.operations import unserved
from registry.reruns.services import (
    CPU_SLUG,
    JobRefused,
    ceilings_request,
    job_cancel,
    measure_request,
    rerun_request,
)


def has_request_rerun_permission(request) -> bool:
    """Queueing GPU work is its own right (the moderators group has it), apart from editing runs."""
    return request.user.has_perm("reruns.request_rerun")


class RerunRequestForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    issue_report_pk = forms.IntegerField(required=False, min_value=1, label="Issue report number")


def request_limited(request) -> HttpResponse | None:
    """A 429 with Retry-After once this moderator has asked for too many job batches; each
    batch keeps GPUs busy, so a stuck button or a script cannot flood the queues."""
    limited = limit_consume(
        request,
        action="jobs",
        limits=settings.RERUN_REQUEST_LIMITS,
        what="rerun and measure requests",
        verb="make",
    )
    if limited is None:
        return None
    return HttpResponse(
        escape(limited.message), status=429, headers={"Retry-After": str(limited.retry_after)}
    )


@admin.action(description="Request rerun on the run's GPU model", permissions=["request_rerun"])
def request_rerun(modeladmin, request, queryset):
    """Intermediate page first: who asks is recorded, and why."""
    if "apply" in request.POST:
        form = RerunRequestForm(request.POST)
        if form.is_valid():
            limited = request_limited(request)
            if limited:
                return limited
            _reruns_request(modeladmin, request, queryset, form.cleaned_data)
            return None
    else:
        form = RerunRequestForm()

    runs = queryset.select_related("implementation", "environment")
    return TemplateResponse(
        request,
        "admin/reruns/rerunjob/request_rerun.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Request controlled reruns",
            "runs": runs,
            "unserved": unserved({f"gpu.{run.environment.slug}" for run in runs}),
            "form": form,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
        },
    )


def _reruns_request(modeladmin, request, queryset, data):
    created = 0
    runs = list(queryset.select_related("implementation", "environment"))
    for run in runs:
        try:
            rerun_request(
                run=run,
                requested_by=request.user,
                reason=data["reason"],
                issue_report_pk=data["issue_report_pk"],
            )
            created += 1
        except JobRefused as refusal:
            modeladmin.message_user(request, str(refusal), messages.WARNING)
    if created:
        modeladmin.message_user(request, f"{created} rerun job(s) queued.", messages.SUCCESS)
    for queue in unserved({f"gpu.{run.environment.slug}" for run in runs}):
        modeladmin.message_user(
            request,
            f"No live worker serves {queue}: its jobs wait, queued, until one starts.",
            messages.WARNING,
        )


def _gpu_choices():
    slugs = set(Environment.objects.values_list("slug", flat=True)) | {CPU_SLUG}
    return [(slug, slug) for slug in sorted(slugs)]


def _provider_choices():
    providers = Implementation.objects.order_by("provider").values_list("provider", flat=True).distinct()
    return [(p, p) for p in providers]


class MeasureRequestForm(forms.Form):
    kernel = forms.ModelChoiceField(queryset=Kernel.objects.order_by("name"))
    providers = forms.MultipleChoiceField(
        choices=_provider_choices, widget=forms.CheckboxSelectMultiple, label="Implementations"
    )
    operation_modes = forms.MultipleChoiceField(
        choices=TimedPass.choices, widget=forms.CheckboxSelectMultiple, label="Timed passes"
    )
    metrics = forms.MultipleChoiceField(choices=Metric.choices, widget=forms.CheckboxSelectMultiple)
    gpu_slug = forms.ChoiceField(choices=_gpu_choices, label="GPU model")
    workloads = forms.ModelMultipleChoiceField(
        queryset=Workload.objects.select_related("kernel").order_by("kernel__slug", "slug"),
        required=False,
        help_text="Leave empty for every workload of the kernel that has runs of these implementations.",
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def clean(self):
        data = super().clean()
        kernel, workloads = data.get("kernel"), data.get("workloads")
        if kernel and workloads and any(w.kernel_id != kernel.pk for w in workloads):
            raise forms.ValidationError("Every workload must belong to the chosen kernel.")
        return data


@admin.register(RerunJob)
class RerunJobAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "kind",
        "state",
        "kernel",
        "provider",
        "operation_mode",
        "metric",
        "gpu_slug",
        "attempts",
        "median_shown",
        "deviation_shown",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "timed_out", "kind", "gpu_slug", "metric", "operation_mode", "kernel"]
    search_fields = ["run__external_id", "provider", "worker_host", "reason"]
    search_hint = "A run's id (1234 or #1234) finds its jobs; or a provider, host or reason."

    def get_search_results(self, request, queryset, search_term):
        return search_with_id(super(), request, queryset, search_term, "run_id")

    list_select_related = ["kernel"]
    actions = ["cancel_jobs"]
    change_list_template = "admin/reruns/rerunjob/change_list.html"

    @admin.display(description="median", ordering="median")
    def median_shown(self, obj):
        return "—" if obj.median is None else f"{obj.median:.4g}"

    @admin.display(description="deviation", ordering="deviation")
    def deviation_shown(self, obj):
        return "—" if obj.deviation is None else f"{obj.deviation:+.2%}"

    def get_readonly_fields(self, request, obj=None):
        # Jobs change only through the services; the admin shows them.
        return [f.name for f in RerunJob._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Cancel selected queued jobs", permissions=["request_rerun"])
    def cancel_jobs(self, request, queryset):
        cancelled = sum(
            job_cancel(job=job, actor=request.user) for job in queryset.filter(state=JobState.QUEUED)
        )
        self.message_user(request, f"{cancelled} job(s) cancelled; running jobs are left to finish.")

    def get_urls(self):
        return [
            path(
                "measure/",
                self.admin_site.admin_view(self.measure_view),
                name="reruns_rerunjob_measure",
            ),
            *super().get_urls(),
        ]

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "can_request": self.has_request_rerun_permission(request)}
        return super().changelist_view(request, extra_context)

    def measure_view(self, request):
        if not self.has_request_rerun_permission(request):
            raise PermissionDenied
        form = MeasureRequestForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            limited = request_limited(request)
            if limited:
                return limited
            data = form.cleaned_data
            try:
                outcome = measure_request(
                    kernel=data["kernel"],
                    providers=data["providers"],
                    operation_modes=data["operation_modes"],
                    metrics=data["metrics"],
                    gpu_slug=data["gpu_slug"],
                    workloads=data["workloads"] or None,
                    requested_by=request.user,
                    reason=data["reason"],
                )
            except JobRefused as refusal:
                form.add_error(None, str(refusal))
            else:
                self.message_user(request, f"{len(outcome.created)} measure job(s) queued.", messages.SUCCESS)
                for skipped in outcome.skipped:
                    self.message_user(request, f"Skipped {skipped}.", messages.WARNING)
                return HttpResponseRedirect(reverse("admin:reruns_rerunjob_changelist"))
        return TemplateResponse(
            request,
            "admin/reruns/rerunjob/measure.html",
            {
                **self.admin_site.each_context(request),
                "title": "Request measure jobs",
                "form": form,
                "opts": self.model._meta,
            },
        )


@admin.register(MeasuredCeiling)
class MeasuredCeilingAdmin(admin.ModelAdmin):
    list_display = ["gpu_slug", "measured_at", "memory_bandwidth", "bf16_tflops", "job"]
    list_filter = ["gpu_slug"]
    readonly_fields = [f.name for f in MeasuredCeiling._meta.fields]

    def has_add_permission(self, request):
        return False  # a ceilings job or `manage.py measure_ceilings` makes these

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # runs cite a ceiling in their speed of light: a new measurement supersedes it


@admin.register(WorkerKey)
class WorkerKeyAdmin(registry_admin.ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: keys are registered, revoked and rotated with `manage.py worker_key`
    (docs/deploy.md, "GPU workers"), so that every change goes through its service."""

    list_display = ("name", "gpu_slug", "active", "card_list", "created_at", "revoked_at", "public_key")
    list_filter = ("gpu_slug",)
    search_fields = ("name", "public_key", "cards")
    readonly_fields = ("name", "gpu_slug", "public_key", "cards", "note", "created_at", "revoked_at")

    @admin.display(boolean=True, description="active")
    def active(self, key):
        return key.revoked_at is None

    @admin.display(description="cards")
    def card_list(self, key):
        return ", ".join(key.cards) or "-"


# The registry's admin knows nothing of jobs; the actions that queue them on runs and GPU models
# are added here, to the registry's own admin classes.


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


admin.site.unregister(BenchmarkRun)
admin.site.unregister(Environment)


@admin.register(BenchmarkRun)
class BenchmarkRunWithRerunsAdmin(registry_admin.BenchmarkRunAdmin):
    actions = [request_rerun]

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request)


@admin.register(Environment)
class EnvironmentWithCeilingsAdmin(registry_admin.EnvironmentAdmin):
    actions = [request_ceilings]

    def has_request_rerun_permission(self, request):
        return has_request_rerun_permission(request)
