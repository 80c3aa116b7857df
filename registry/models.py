"""The registry: who ran what, on which workload, how it was timed, where, and what it measured.

Specs (workload, protocol, environment, implementation) are content-addressed: each row stores the
sha256 digest of its canonical spec, so re-importing the same data finds the same rows.
"""

from django.db import models
from django.urls import reverse
from django.utils import timezone


class EvidenceLevel(models.TextChoices):
    REPORTED = "reported", "Reported"
    MEASURED = "measured", "Measured"
    REPRODUCED = "reproduced", "Reproduced"


EVIDENCE_EXPLANATIONS = {
    EvidenceLevel.REPORTED: "The source published it; KernelIndex has not checked it.",
    EvidenceLevel.MEASURED: "Produced by a KernelIndex-controlled run, with raw samples and a "
    "captured environment.",
    EvidenceLevel.REPRODUCED: "A KernelIndex-controlled rerun on the same GPU model agreed with "
    "the recorded value within the protocol's tolerance.",
}


class TimedPass(models.TextChoices):
    FORWARD = "forward", "Forward"
    BACKWARD = "backward", "Backward"
    FULL = "full", "Full (forward + backward)"
    NO_GRAD_FORWARD = "no-grad-forward", "Forward without autograd (torch.no_grad)"


class Metric(models.TextChoices):
    LATENCY = "latency", "Latency"
    MEMORY = "memory", "Peak memory"


# The source of the runs KernelIndex's own workers measure (registry/reruns/services/measured_run.py
# makes it); the registry's pages tell those runs by it.
CONTROLLED_SOURCE_SLUG = "kernelindex-controlled"


class Source(models.Model):
    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    url = models.URLField(blank=True)
    license = models.CharField(max_length=100, blank=True)
    license_url = models.URLField(blank=True)
    description = models.TextField(blank=True)

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("registry:source-detail", args=[self.slug])


class SourceImport(models.Model):
    """One import of one file into a source: the source page's import history."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="imports")
    filename = models.CharField(max_length=500)
    file_digest = models.CharField(max_length=80)
    release = models.CharField(max_length=100, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)
    rows = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    superseded = models.PositiveIntegerField(default=0)
    withdrawn = models.PositiveIntegerField(default=0)
    restored = models.PositiveIntegerField(default=0, help_text="Withdrawn runs listed again.")
    # Which upstream state the file is, and when: a version of the repository's history carries
    # its commit, author date and pull request. An import older than one already made (a history
    # imported after a release) adds the values it published but no longer speaks for what is
    # listed now: `as_of` orders the imports of a source.
    as_of = models.DateTimeField(
        default=timezone.now,
        help_text="When upstream published this file: a commit's date, else the import's.",
    )
    upstream_commit = models.CharField(max_length=40, blank=True, db_index=True)
    pull_request = models.PositiveIntegerField(null=True, blank=True)
    subject = models.CharField(max_length=500, blank=True, help_text="The commit's subject line.")
    kernels = models.JSONField(
        default=list, blank=True, help_text="Kernels this version published new values of."
    )

    class Meta:
        ordering = ["-imported_at", "-pk"]

    def __str__(self):
        return f"{self.source} · {self.filename} · {self.imported_at:%Y-%m-%d %H:%M}"

    @property
    def commit_url(self) -> str:
        return f"{self.source.url.rstrip('/')}/commit/{self.upstream_commit}" if self.upstream_commit else ""

    @property
    def pull_request_url(self) -> str:
        return f"{self.source.url.rstrip('/')}/pull/{self.pull_request}" if self.pull_request else ""


class Kernel(models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("registry:kernel-detail", args=[self.slug])


class Implementation(models.Model):
    kernel = models.ForeignKey(Kernel, on_delete=models.PROTECT, related_name="implementations")
    provider = models.CharField(max_length=100, help_text="As the source names it.")
    project = models.CharField(max_length=200)
    project_url = models.URLField(blank=True)
    revision = models.CharField(max_length=100, blank=True, help_text="Blank when unknown.")
    description = models.CharField(max_length=300, blank=True)
    spec = models.JSONField()
    digest = models.CharField(max_length=80, unique=True)

    class Meta:
        ordering = ["kernel__name", "provider"]

    def __str__(self):
        return f"{self.provider} ({self.kernel.slug})"


class Workload(models.Model):
    kernel = models.ForeignKey(Kernel, on_delete=models.PROTECT, related_name="workloads")
    parameters = models.JSONField()
    tensors = models.JSONField(default=list, help_text="[{name, dtype, shape}] where known.")
    dtype = models.CharField(max_length=20, blank=True)
    x_name = models.CharField(max_length=50, help_text="The swept parameter, as the source names it.")
    x_label = models.CharField(max_length=100, blank=True)
    x_value = models.FloatField(null=True, blank=True)
    slug = models.CharField(max_length=300)
    summary = models.CharField(max_length=300)
    reference_asserted = models.BooleanField(default=False)
    # The workload's own source text where the source publishes one (a KernelBench problem
    # file); outside the spec, which carries its digest.
    text = models.TextField(blank=True, default="")
    spec = models.JSONField()
    digest = models.CharField(max_length=80, unique=True)

    def __str__(self):
        return f"{self.kernel.slug}: {self.summary}"


class Protocol(models.Model):
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    harness = models.CharField(max_length=200)
    harness_repository = models.URLField(blank=True)
    timer = models.CharField(max_length=100)
    statistic = models.CharField(max_length=50)
    comparability_family = models.CharField(max_length=100)
    notes = models.TextField(blank=True)
    spec = models.JSONField()
    digest = models.CharField(max_length=80, unique=True)

    def __str__(self):
        return self.name


class Environment(models.Model):
    slug = models.SlugField(max_length=100, help_text="The GPU model, e.g. nvidia-a100-sxm4-80gb.")
    vendor = models.CharField(max_length=100)
    product = models.CharField(max_length=200)
    form_factor = models.CharField(max_length=50, blank=True)
    architecture = models.CharField(max_length=50, blank=True)
    software = models.JSONField(default=dict, blank=True)
    spec = models.JSONField()
    digest = models.CharField(max_length=80, unique=True)

    class Meta:
        ordering = ["product"]

    def __str__(self):
        return self.product


class BenchmarkRunQuerySet(models.QuerySet):
    def public(self):
        """What every public view, endpoint and export starts from."""
        return self.select_related(
            "kernel", "implementation", "workload", "protocol", "environment", "source"
        )

    def current(self):
        """Runs still listed by their source and not replaced by a newer row."""
        return self.filter(withdrawn=False, superseded_by__isnull=True)


class BenchmarkRun(models.Model):
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="runs")
    kernel = models.ForeignKey(Kernel, on_delete=models.PROTECT, related_name="runs")
    implementation = models.ForeignKey(Implementation, on_delete=models.PROTECT, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    protocol = models.ForeignKey(Protocol, on_delete=models.PROTECT, related_name="runs")
    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="runs")
    operation_mode = models.CharField(max_length=20, choices=TimedPass.choices)
    metric = models.CharField(max_length=10, choices=Metric.choices)
    unit = models.CharField(max_length=10)
    median = models.FloatField()
    p20 = models.FloatField()
    p80 = models.FloatField()
    source_metrics = models.JSONField(default=dict, help_text="As the source names them.")
    observed_at = models.DateTimeField()
    source_status = models.CharField(max_length=50, default="passed")
    correctness_note = models.CharField(max_length=300, blank=True)
    external_id = models.CharField(max_length=400, unique=True)
    upstream_key = models.CharField(
        max_length=80, db_index=True, help_text="Digest of the source's own key for the row."
    )
    labels = models.JSONField(default=dict, blank=True)
    evidence_level = models.CharField(
        max_length=12, choices=EvidenceLevel.choices, default=EvidenceLevel.REPORTED
    )
    comparison_key = models.CharField(max_length=80)
    rank = models.PositiveIntegerField(null=True, blank=True)
    group_size = models.PositiveIntegerField(null=True, blank=True)
    digest = models.CharField(max_length=80, unique=True)
    manifest = models.JSONField()
    withdrawn = models.BooleanField(default=False)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="supersedes"
    )
    first_import = models.ForeignKey(
        SourceImport, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    # Where the value was first published upstream: the earliest version of the source known to
    # list it (a commit of the repository's history, or the release it first arrived in). Outside
    # the manifest on purpose: the same row arrives from a release or from the history, in either
    # order, and must keep one digest; learning an earlier commit refines this, never the record.
    origin = models.ForeignKey(
        SourceImport, null=True, blank=True, on_delete=models.PROTECT, related_name="originated"
    )
    published_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Copies of spec values, written with the run (registry.services.run_keys): the kernel page
    # sorts and groups on them through the indexes below instead of sorting joined rows.
    gpu_product = models.CharField(max_length=200, default="", editable=False)
    provider = models.CharField(max_length=100, default="", editable=False)
    x_name = models.CharField(max_length=50, default="", editable=False)
    # Nullable as Workload.x_value is (a categorical sweep): NULL sorts where the join sorted it.
    x_value = models.FloatField(null=True, blank=True, editable=False)
    # The speed-of-light verdict (registry.speed_of_light), derived from the workload, the GPU's
    # ceilings and the measurements, written with the run and again when a ceiling changes. Outside
    # the manifest: a better ceiling refines the verdict, never the record.
    speed_of_light = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="Bytes, FLOPs, ceilings with their sources, floors and percentages; or why not counted.",
    )
    sol_percent = models.FloatField(
        null=True, blank=True, editable=False, help_text="Floor / measured, against the datasheet ceiling."
    )
    sol_percent_measured = models.FloatField(
        null=True,
        blank=True,
        editable=False,
        help_text="Floor / measured, against KernelIndex's measured ceiling.",
    )
    implausible = models.BooleanField(
        default=False,
        editable=False,
        help_text="Faster than the GPU's speed of light, or a peak below the memory that must be live.",
    )

    objects = BenchmarkRunQuerySet.as_manager()

    class Meta:
        ordering = ["kernel__slug", "external_id"]
        indexes = [
            models.Index(fields=["comparison_key", "rank"]),
            models.Index(fields=["kernel", "environment", "operation_mode", "metric"]),
            models.Index(fields=["evidence_level"]),
            models.Index(fields=["withdrawn"]),
            models.Index(
                fields=["implausible"], condition=models.Q(implausible=True), name="run_implausible"
            ),
            models.Index(fields=["-published_at"]),
            # The kernel page's default order: a page of 50 is 50 index entries.
            models.Index(
                fields=["kernel", "gpu_product", "operation_mode", "metric", "provider", "x_value", "id"],
                name="run_kernel_page_order",
            ),
            # The kernel page's chart panels: one probe per (GPU, pass, metric, swept parameter).
            models.Index(
                fields=["kernel", "environment", "operation_mode", "metric", "x_name"],
                condition=models.Q(withdrawn=False, superseded_by__isnull=True),
                name="run_kernel_current_panels",
            ),
        ]
        # A published record's measurements never change (corrections are new runs, from the
        # importer or a controlled run); what the database can check about them, it does.
        # `manage.py verify_registry` checks the rest: digests, manifests and ranks.
        constraints = [
            models.CheckConstraint(
                condition=models.Q(p20__gte=0, median__gte=0, p80__gte=0), name="run_measurements_nonnegative"
            ),
            models.CheckConstraint(
                condition=models.Q(p20__lte=models.F("median"), median__lte=models.F("p80")),
                name="run_quantiles_ordered",
            ),
            models.CheckConstraint(
                condition=models.Q(rank__isnull=True, group_size__isnull=True)
                | models.Q(rank__gte=1, rank__lte=models.F("group_size")),
                name="run_rank_within_group",
            ),
            models.CheckConstraint(
                condition=~models.Q(superseded_by=models.F("pk")), name="run_not_superseded_by_itself"
            ),
            # One current run per target (comparison group and implementation): a target measured
            # again supersedes its earlier run, never ranks beside it (docs/reruns.md).
            models.UniqueConstraint(
                fields=["comparison_key", "implementation"],
                condition=models.Q(withdrawn=False, superseded_by__isnull=True),
                name="one_current_run_per_target",
            ),
        ]

    def __str__(self):
        return self.external_id

    def get_absolute_url(self):
        return reverse("registry:run-detail", args=[self.pk])

    @property
    def is_current(self):
        return not self.withdrawn and self.superseded_by_id is None


class Verdict(models.TextChoices):
    """A rerun's equivalence judgement on the relative difference of medians (its 95% interval
    against ±RERUN_TOLERANCE); only `agrees` makes a run `reproduced`."""

    AGREES = "agrees", "Agrees"
    DISAGREES = "disagrees", "Disagrees"
    INCONCLUSIVE = "inconclusive", "Inconclusive"


class SourceSync(models.Model):
    """One attempt to bring a source up to date with an upstream release (`manage.py sync_liger`,
    or the daily beat task). Written outside the import's transaction, so a failed attempt is
    remembered even though it left the registry untouched."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        IMPORTED = "imported", "Imported"
        UP_TO_DATE = "up-to-date", "Already up to date"
        FAILED = "failed", "Failed"

    source_slug = models.SlugField(default="liger-kernel")
    requested_version = models.CharField(max_length=100, blank=True, help_text="Blank: the newest.")
    release = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    archive_url = models.URLField(max_length=500, blank=True)
    archive_digest = models.CharField(max_length=80, blank=True)
    files = models.JSONField(default=list, blank=True, help_text="[{filename, file_digest, summary}]")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True, help_text="When moderators were told.")

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self):
        return f"{self.source_slug} {self.release or self.requested_version or 'newest'}: {self.status}"


class ChangeKind(models.TextChoices):
    IMPROVEMENT = "improvement", "Improvement"
    REGRESSION = "regression", "Regression"
    UNCERTAIN = "uncertain", "Uncertain"


class ChangeQuerySet(models.QuerySet):
    def public(self):
        return self.select_related(
            "kernel",
            "before",
            "after",
            "after__implementation",
            "after__workload",
            "after__environment",
            "attributed_to",
            "attributed_to__source",
        )


class Change(models.Model):
    """A step between two consecutive values of one series (same kernel, implementation, pass,
    metric, workload, protocol family and GPU: a comparison group and a provider), judged with
    the uncertainty the two values carry (registry.services.changes). Steps that are noise are
    not kept; the rest are one of `ChangeKind`."""

    kernel = models.ForeignKey(Kernel, on_delete=models.PROTECT, related_name="changes")
    before = models.ForeignKey(BenchmarkRun, on_delete=models.PROTECT, related_name="changes_from")
    after = models.ForeignKey(BenchmarkRun, on_delete=models.PROTECT, related_name="changes_to")
    kind = models.CharField(max_length=12, choices=ChangeKind.choices)
    ratio = models.FloatField(help_text="after / before, of the medians (lower is better).")
    p_value = models.FloatField(
        null=True, blank=True, help_text="Mann-Whitney, where both sides have samples."
    )
    evidence = models.CharField(max_length=500, help_text="What the call rests on, in words.")
    attributed_to = models.ForeignKey(
        SourceImport,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="changes",
        help_text="The upstream version that first published the new value.",
    )
    observed_at = models.DateTimeField(help_text="When the new value was measured.")
    # Copies of the series' parts, for the changes page's filters (as on the run).
    gpu_product = models.CharField(max_length=200)
    provider = models.CharField(max_length=100)
    operation_mode = models.CharField(max_length=20, choices=TimedPass.choices)
    metric = models.CharField(max_length=10, choices=Metric.choices)

    objects = ChangeQuerySet.as_manager()

    class Meta:
        ordering = ["-observed_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["before", "after"], name="one_change_per_step")]
        indexes = [
            models.Index(fields=["kind", "-observed_at"]),
            models.Index(fields=["kernel", "-observed_at"]),
        ]

    def __str__(self):
        return f"{self.kind} {self.ratio:.3f} ({self.after.external_id})"

    def get_absolute_url(self):
        return reverse("registry:change-list") + f"#change-{self.pk}"

    @property
    def percent(self) -> float:
        return 100 * (self.ratio - 1)
