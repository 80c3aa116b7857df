"""What the community says about runs, and what moderators decided about it.

Attestations (reproductions and notes) and issue reports are discussion, never evidence: nothing
here touches a run's evidence level. Every decision leaves an `AuditEntry`, which is append-only.
"""

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.urls import reverse

from registry.models import BenchmarkRun, Verdict

TEXT_MAX = 5000
REASON_MAX = 2000
LINK_MAX = 500
LINKS_MAX = 3
VERSION_MAX = 50


class AttestationKind(models.TextChoices):
    REPRODUCTION = "reproduction", "Reproduction"
    NOTE = "note", "Note"


class AttestationOrigin(models.TextChoices):
    """Where a reproduction's figures come from: typed into the form, or computed by KernelIndex
    from the samples of a result file that the kit wrote (docs/reproduce.md)."""

    TYPED = "typed", "Typed into the form"
    FILE = "file", "Result file from the kit"


class AttestationState(models.TextChoices):
    PENDING = "pending", "Pending moderation"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class AttestationQuerySet(models.QuerySet):
    def approved(self):
        """What the public may see: every public page, endpoint and export starts here."""
        return self.filter(state=AttestationState.APPROVED)

    def pending(self):
        return self.filter(state=AttestationState.PENDING)

    def visible_to(self, user):
        """Approved ones, plus the user's own in any state, plus everything for moderators."""
        if user.is_authenticated and user.has_perm("attestations.moderate_attestation"):
            return self.all()
        if user.is_authenticated:
            return self.filter(models.Q(state=AttestationState.APPROVED) | models.Q(author=user))
        return self.approved()


class Attestation(models.Model):
    Kind = AttestationKind
    State = AttestationState
    Origin = AttestationOrigin

    run = models.ForeignKey(BenchmarkRun, on_delete=models.PROTECT, related_name="attestations")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="attestations"
    )
    kind = models.CharField(max_length=12, choices=AttestationKind.choices)
    state = models.CharField(
        max_length=10, choices=AttestationState.choices, default=AttestationState.PENDING
    )
    # A reproduction's figures, in the run's unit; empty for a note.
    median = models.FloatField(null=True, blank=True)
    p20 = models.FloatField(null=True, blank=True)
    p80 = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=10, blank=True)
    gpu_product = models.CharField("GPU product", max_length=100, blank=True)
    driver_version = models.CharField(max_length=VERSION_MAX, blank=True)
    cuda_version = models.CharField("CUDA version", max_length=VERSION_MAX, blank=True)
    torch_version = models.CharField(max_length=VERSION_MAX, blank=True)
    triton_version = models.CharField(max_length=VERSION_MAX, blank=True)
    liger_version = models.CharField("liger-kernel version", max_length=VERSION_MAX, blank=True)
    harness = models.CharField(
        "harness command or version", max_length=300, blank=True, help_text="How it was timed."
    )
    links = models.JSONField(default=list, blank=True, help_text="Up to three http(s) artifact links.")
    text = models.TextField(blank=True)
    # A reproduction filed from the kit's result file: its figures were computed here, from
    # `samples`; `result` is the checked file without its samples, `checks` what was checked.
    origin = models.CharField(
        max_length=5, choices=AttestationOrigin.choices, default=AttestationOrigin.TYPED
    )
    samples = models.JSONField(default=list, blank=True)
    ci_low = models.FloatField(
        null=True, blank=True, help_text="95% interval of the median, from the samples."
    )
    ci_high = models.FloatField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    checks = models.JSONField(default=list, blank=True)
    verdict = models.CharField(max_length=12, choices=Verdict.choices, blank=True)
    deviation = models.FloatField(null=True, blank=True)
    deviation_low = models.FloatField(null=True, blank=True)
    deviation_high = models.FloatField(null=True, blank=True)
    verdict_note = models.TextField(blank=True)
    content_digest = models.CharField(
        max_length=64, help_text="sha256 of the normalised content: one user cannot file it twice."
    )
    rejection_reason = models.TextField(blank=True, help_text="Shown to the author.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AttestationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("moderate_attestation", "Can approve or reject attestations")]
        constraints = [
            models.UniqueConstraint(
                fields=["author", "content_digest"], name="attestation_unique_content_per_author"
            ),
            # One measurement counts once: a result file (its digest) is filed once per run,
            # whoever files it; a rejected filing does not count.
            models.UniqueConstraint(
                fields=["run", "content_digest"],
                condition=models.Q(origin=AttestationOrigin.FILE)
                & ~models.Q(state=AttestationState.REJECTED),
                name="one_filing_per_result_file",
            ),
            models.CheckConstraint(
                condition=models.Q(kind=AttestationKind.NOTE)
                | (
                    models.Q(median__gt=0, p20__gt=0, p80__gt=0)
                    & models.Q(p20__lte=models.F("median"), median__lte=models.F("p80"))
                ),
                name="attestation_reproduction_figures_ordered",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "state"]),
            models.Index(fields=["state", "created_at"]),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} #{self.pk} on run {self.run_id}"

    def get_absolute_url(self):
        return reverse("attestations:attestation-detail", args=[self.pk])

    @property
    def is_reproduction(self) -> bool:
        return self.kind == AttestationKind.REPRODUCTION

    @property
    def carries_data(self) -> bool:
        return self.origin == AttestationOrigin.FILE

    @property
    def environment(self) -> dict:
        return self.result.get("environment") or {}

    @property
    def deviation_percent(self) -> float | None:
        """How far this reproduction's median is from the run's recorded one, in percent."""
        if self.median is None or not self.run.median:
            return None
        return (self.median - self.run.median) / self.run.median * 100

    @property
    def versions(self) -> list[tuple[str, str]]:
        names = ["driver_version", "cuda_version", "torch_version", "triton_version", "liger_version"]
        return [
            (self._meta.get_field(name).verbose_name, getattr(self, name))
            for name in names
            if getattr(self, name)
        ]


class IssueReportCategory(models.TextChoices):
    WRONG_VALUE = "wrong_value", "Wrong value"
    WRONG_WORKLOAD = "wrong_workload", "Wrong workload or shapes"
    WRONG_ENVIRONMENT = "wrong_environment", "Wrong environment"
    CORRECTNESS = "correctness", "Correctness concern"
    DUPLICATE = "duplicate", "Duplicate"
    LICENSING = "licensing", "Licensing"
    OTHER = "other", "Other"


class IssueReportState(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


class IssueReportQuerySet(models.QuerySet):
    def open(self):
        return self.filter(state__in=[IssueReportState.OPEN, IssueReportState.ACKNOWLEDGED])

    def visible_to(self, user):
        """Reports are private: their reporter and the moderators see them."""
        if not user.is_authenticated:
            return self.none()
        if user.has_perm("attestations.triage_issuereport"):
            return self.all()
        return self.filter(reporter=user)


class IssueReport(models.Model):
    Category = IssueReportCategory
    State = IssueReportState

    run = models.ForeignKey(BenchmarkRun, on_delete=models.PROTECT, related_name="issue_reports")
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="issue_reports",
        help_text="Empty when KernelIndex filed it (e.g. a diverged rerun).",
    )
    category = models.CharField(max_length=20, choices=IssueReportCategory.choices)
    description = models.TextField()
    state = models.CharField(max_length=12, choices=IssueReportState.choices, default=IssueReportState.OPEN)
    resolution = models.TextField(blank=True, help_text="Shown to the reporter.")
    content_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = IssueReportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("triage_issuereport", "Can acknowledge, resolve or dismiss issue reports")]
        constraints = [
            models.UniqueConstraint(
                fields=["reporter", "content_digest"], name="issue_report_unique_content_per_reporter"
            ),
        ]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self):
        return f"Issue report #{self.pk} on run {self.run_id}"

    def get_absolute_url(self):
        return reverse("attestations:report-detail", args=[self.pk])

    @property
    def is_system_filed(self) -> bool:
        return self.reporter_id is None


class AuditEntryQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("Audit entries are append-only.")

    def delete(self):
        raise TypeError("Audit entries are never deleted.")

    def for_object(self, obj):
        return self.filter(content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk).order_by(
            "created_at", "pk"
        )


class AuditEntry(models.Model):
    """One decision or state change: who, when, what, from which state to which, and why."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Empty when KernelIndex itself acted.",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    content_type = models.ForeignKey(ContentType, on_delete=models.PROTECT)
    object_id = models.PositiveBigIntegerField()
    target = GenericForeignKey("content_type", "object_id")
    object_repr = models.CharField(max_length=200)
    action = models.CharField(max_length=40)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["content_type", "object_id"])]

    def __str__(self):
        who = self.actor or "KernelIndex"
        return f"{self.created_at:%Y-%m-%d %H:%M} {who}: {self.action} {self.object_repr}"

    def save(self, *args, **kwargs):
        # A guard, not a side effect: an entry, once written, stays as it was.
        if not self._state.adding:
            raise TypeError("Audit entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("Audit entries are never deleted.")


class Notification(models.Model):
    """One email sent about one audit entry to one address, so a task run twice sends it once."""

    entry = models.ForeignKey(AuditEntry, on_delete=models.PROTECT, related_name="notifications")
    email = models.EmailField()
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "email"], name="notification_once_per_address")
        ]

    def __str__(self):
        return f"{self.email} about entry {self.entry_id}"
