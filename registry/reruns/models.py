"""The controlled-run pipeline's records: rerun and measure jobs (`RerunJob`) and the ceilings a
GPU model was measured to reach (`MeasuredCeiling`). Their tables keep the names they had when these
models lived in the registry app (`registry_rerunjob`, `registry_measuredceiling`)."""

import functools
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from registry.models import BenchmarkRun, Kernel, Metric, TimedPass, Verdict, Workload
from registry.reruns.judged import judged_interval
from registry.stats import intervals, verdict_model


class JobKind(models.TextChoices):
    RERUN = "rerun", "Rerun of a recorded run"
    MEASURE = "measure", "New measurement"
    CEILINGS = "ceilings", "Measured ceilings of a GPU model"


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    DIVERGED = "diverged", "Diverged"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


def raises_level(verdict: str, sampling: dict | None, *, on_gpu: bool = True) -> bool:
    """Whether a rerun's verdict makes its run `reproduced`: it agrees on another card than the
    one that measured the run (a one-GPU host reruns there). `reproduced` means two physical GPUs
    agreed: where a KernelIndex card measured the run (judged on its samples, `basis` "samples")
    on a GPU, both cards must be recorded and differ, so a run whose measuring card is not
    recorded (8 older H200 GeGLU runs) stays `measured`. A source's run (judged on upstream's
    figure) was measured on the source's machine, and a CPU has no card: there an agreeing rerun
    counts unless it is known to be the same card. Takes the stored fields, so the shipped files'
    loader judges their jobs by the same rule as the recorder."""
    sampling = sampling if isinstance(sampling, dict) else {}
    same_gpu = sampling.get("same_gpu")
    if verdict != Verdict.AGREES:
        return False
    # A rerun of an op the host paces (its figure is the host's pace) has a verdict of its own
    # class and never makes a run `reproduced`; one whose pass waits on the host once a call is
    # judged in a class of its own and may (registry/stats/verdict_model.py).
    account = sampling.get("verdict_model")
    if isinstance(account, dict) and verdict_model.is_paced(str(account.get("verdict_class") or "")):
        return False
    if same_gpu is not None:
        return same_gpu is False
    return not (on_gpu and sampling.get("basis") == "samples")


ACTIVE_JOB_STATES = (JobState.QUEUED, JobState.RUNNING)


class RerunJobQuerySet(models.QuerySet):
    def active(self):
        return self.filter(state__in=ACTIVE_JOB_STATES)

    def lost(self, now):
        """Running jobs whose attempt is taken as lost, the one statement of the rule: no heartbeat
        for JOB_STALE_AFTER, and no result sent within JOB_RESULT_DEADLINE (a sent result waits to
        be recorded, though the heartbeat has stopped). The reconciler requeues these, a second
        delivery may claim them, and the operations page lists them as stuck."""
        stale = now - timedelta(seconds=settings.JOB_STALE_AFTER)
        deadline = now - timedelta(seconds=settings.JOB_RESULT_DEADLINE)
        return self.filter(state=JobState.RUNNING, heartbeat_at__lt=stale).filter(
            Q(result_sent_at__isnull=True) | Q(result_sent_at__lt=deadline)
        )

    def public(self):
        """What the job pages and the jobs API start from: every job, with what it is about."""
        return self.select_related("kernel", "workload", "run", "run__implementation", "result_run")


class RerunJob(models.Model):
    """One controlled run on a KernelIndex GPU worker: a rerun of a recorded run, or a new
    measurement of a workload. Only finishing one (registry.reruns.services.rerun_record_result)
    ever changes a run's evidence level."""

    kind = models.CharField(max_length=10, choices=JobKind.choices)
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.QUEUED)
    run = models.ForeignKey(
        BenchmarkRun,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rerun_jobs",
        help_text="For a rerun: the run measured again.",
    )
    result_run = models.ForeignKey(
        BenchmarkRun,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="measured_by_jobs",
        help_text="For a measure job: the run it created.",
    )
    # What to measure; for a rerun, copied from its run. A ceilings job measures the GPU model
    # itself (a copy and a GEMM) and has neither.
    kernel = models.ForeignKey(Kernel, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    workload = models.ForeignKey(
        Workload, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    provider = models.CharField(max_length=100)
    operation_mode = models.CharField(max_length=20, choices=TimedPass.choices)
    metric = models.CharField(max_length=10, choices=Metric.choices)
    gpu_slug = models.SlugField(max_length=100, help_text="The GPU model that must run it.")
    # Who asked and why.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rerun_jobs",
    )
    reason = models.TextField(blank=True)
    issue_report_pk = models.PositiveIntegerField(
        null=True, blank=True, help_text="The issue report that asked for it, if any."
    )
    # Execution.
    worker_host = models.CharField(max_length=200, blank=True)
    worker_gpu = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease = models.CharField(max_length=40, blank=True, help_text="Names the attempt that holds it.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    result_sent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the attempt holding the lease sent its result; until JOB_RESULT_DEADLINE after "
        "it, the job is waiting to be recorded, not lost.",
    )
    # Now by default, but not forced as auto_now_add would be: the controlled-run loader writes
    # the recorded date of an exported job in the same bulk insert.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="Last time its message was sent.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Result.
    unit = models.CharField(max_length=10, blank=True)
    median = models.FloatField(null=True, blank=True)
    p20 = models.FloatField(null=True, blank=True)
    p80 = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True, help_text="95% interval of the median.")
    ci_high = models.FloatField(null=True, blank=True)
    judged_ci_low = models.FloatField(
        null=True,
        blank=True,
        help_text="95% interval of the median of the samples verdicts and ranks judge (for peak memory, "
        "upstream's peaks): stored with the result, read by rank intervals.",
    )
    judged_ci_high = models.FloatField(null=True, blank=True)
    samples = models.JSONField(default=list, blank=True)
    tolerance = models.FloatField(null=True, blank=True, help_text="Relative; reruns only.")
    deviation = models.FloatField(
        null=True, blank=True, help_text="(result − recorded) / recorded; reruns only."
    )
    verdict = models.CharField(max_length=12, choices=Verdict.choices, blank=True)
    deviation_low = models.FloatField(
        null=True, blank=True, help_text="95% interval of the relative difference of medians; reruns only."
    )
    deviation_high = models.FloatField(null=True, blank=True)
    verdict_note = models.TextField(blank=True, help_text="What the verdict rests on, in words.")
    judged_under = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="The rule its verdict was last judged under (judgement.judgement_rule: the judging code, "
        "the verdict models, the tolerance); reruns_rejudge passes over a rerun judged under today's. "
        "Written only by the recorder, never read from a file.",
    )
    gpu_uuid = models.CharField(max_length=64, blank=True, help_text="The physical GPU that ran it (NVML).")
    avoid_gpu_uuid = models.CharField(
        max_length=64,
        blank=True,
        help_text="A rerun: the card that measured the run; another card of the fleet takes the job.",
    )
    gpu_state = models.JSONField(
        default=dict,
        blank=True,
        help_text="NVML clocks, temperature, power and throttle reasons, before and after.",
    )
    sampling = models.JSONField(
        default=dict,
        blank=True,
        help_text="How sampling stopped (precision or budget), the precision reached, and where the "
        "host's seconds went (process start, setup, warm-up, timing).",
    )
    upstream = models.JSONField(
        default=dict, blank=True, help_text="The source protocol's own figure (upstream do_bench), unchanged."
    )
    environment = models.JSONField(default=dict, blank=True)
    protocol = models.JSONField(default=dict, blank=True)
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    timed_out = models.BooleanField(
        default=False, help_text="It ran past its time limit and was killed (its error says which limit)."
    )

    objects = RerunJobQuerySet.as_manager()

    # What anyone may see of a job, the one list: the jobs API's fields (registry/reruns/api.py)
    # and the run page's controlled-run history (registry/reruns/templatetags/rerun_tags.py, which loads
    # only these) both read it; a field shown on either is added here. Raw samples, the captured
    # environment and the protocol are the job's own page and the API's detail; the worker host,
    # lease, log and who asked are the moderators'.
    PUBLIC_FIELDS = (
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
        "gpu_uuid",
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
        "verdict",
        "deviation_low",
        "deviation_high",
        "verdict_note",
        "sampling",
        "upstream",
        "gpu_state",
        "error",
        "timed_out",
    )

    class Meta:
        db_table = "registry_rerunjob"
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["run"],
                condition=models.Q(kind="rerun", state__in=["queued", "running"]),
                name="one_active_rerun_per_run",
            ),
            models.UniqueConstraint(
                fields=["workload", "provider", "operation_mode", "metric", "gpu_slug"],
                condition=models.Q(kind="measure", state__in=["queued", "running"]),
                name="one_active_measure_per_target",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=["measure", "ceilings"]) | models.Q(run__isnull=False),
                name="rerun_has_a_run",
            ),
            models.CheckConstraint(
                condition=models.Q(kind="ceilings") | models.Q(kernel__isnull=False, workload__isnull=False),
                name="job_has_a_workload",
            ),
            models.UniqueConstraint(
                fields=["gpu_slug"],
                condition=models.Q(kind="ceilings", state__in=["queued", "running"]),
                name="one_active_ceilings_per_gpu",
            ),
        ]
        indexes = [models.Index(fields=["state", "heartbeat_at"])]
        # Moderators queue and cancel jobs without any right to edit runs or jobs by hand.
        permissions = [("request_rerun", "Can request and cancel controlled reruns and measure jobs")]

    def __str__(self):
        return f"{self.get_kind_display()} #{self.pk} ({self.state})"

    def get_absolute_url(self):
        return reverse("jobs:detail", args=[self.pk])

    def judged_interval_set(self) -> None:
        """Store the 95% interval of the median of the samples this job is judged on
        (judged.judged_interval), as every path that records samples does."""
        self.judged_ci_low, self.judged_ci_high = judged_interval(self.metric, self.samples, self.upstream)

    @functools.cached_property
    def median_estimate(self) -> intervals.MedianEstimate:
        """The median of the job's samples and its between-block variance (stats.intervals), read
        once for each instance: a finished job's samples never change, and judging every rerun of
        a run again reads its measure job's for each of them."""
        return intervals.median_estimate(self.samples, block_ids=(self.sampling or {}).get("sample_blocks"))

    @classmethod
    def rerun_of(cls, run: "BenchmarkRun", **fields) -> "RerunJob":
        """An unsaved rerun of `run`: its kernel, workload, implementation, pass, metric and GPU
        model, what the harness is asked to run again."""
        return cls(
            kind=JobKind.RERUN,
            run=run,
            kernel=run.kernel,
            workload=run.workload,
            provider=run.implementation.provider,
            operation_mode=run.operation_mode,
            metric=run.metric,
            gpu_slug=run.environment.slug,
            **fields,
        )

    @property
    def queue(self) -> str:
        return f"gpu.{self.gpu_slug}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_JOB_STATES

    @property
    def raises_level(self) -> bool:
        return raises_level(self.verdict, self.sampling, on_gpu=self.gpu_slug != "cpu")

    @property
    def agreement_pct(self) -> float | None:
        """The result as a percentage of the recorded median (100 = identical)."""
        return None if self.deviation is None else 100 * (1 + self.deviation)

    @property
    def deviation_pct(self) -> float | None:
        return None if self.deviation is None else 100 * self.deviation

    @property
    def tolerance_pct(self) -> float | None:
        return None if self.tolerance is None else 100 * self.tolerance


class MeasuredCeiling(models.Model):
    """What KernelIndex measured one GPU model to reach: device-to-device copy bandwidth and dense
    bf16 GEMM throughput, each a median of several samples with its 95% interval
    (registry.reruns.ceilings). From a ceilings job, or from a shipped file
    (registry/data/ceilings/) that `manage.py measure_ceilings` wrote on a GPU host."""

    gpu_slug = models.SlugField(max_length=100)
    gpu_name = models.CharField(max_length=200, blank=True)
    measured_at = models.DateTimeField()
    memory_bandwidth = models.FloatField(help_text="GB/s (10^9 bytes/s), bytes read plus bytes written.")
    memory_bandwidth_low = models.FloatField(null=True, blank=True)
    memory_bandwidth_high = models.FloatField(null=True, blank=True)
    bf16_tflops = models.FloatField(help_text="Dense bf16 GEMM, TFLOP/s (10^12 FLOP/s).")
    bf16_tflops_low = models.FloatField(null=True, blank=True)
    bf16_tflops_high = models.FloatField(null=True, blank=True)
    document = models.JSONField(help_text="The whole measurement: samples, sizes, environment.")
    job = models.ForeignKey(
        RerunJob, null=True, blank=True, on_delete=models.PROTECT, related_name="ceilings"
    )

    class Meta:
        db_table = "registry_measuredceiling"
        ordering = ["gpu_slug", "-measured_at"]
        constraints = [
            models.UniqueConstraint(fields=["gpu_slug", "measured_at"], name="one_ceiling_per_measurement"),
            models.CheckConstraint(
                condition=models.Q(memory_bandwidth__gt=0, bf16_tflops__gt=0), name="ceiling_positive"
            ),
        ]

    def __str__(self):
        return f"{self.gpu_slug}: {self.memory_bandwidth:.0f} GB/s, {self.bf16_tflops:.0f} TFLOP/s bf16"


class WorkerKey(models.Model):
    """A GPU worker's Ed25519 public key, registered by an operator (`manage.py worker_key`) for one
    GPU model and the cards (NVML UUIDs) it may report. A worker's claims, heartbeats and results
    count only while its key is registered and not revoked (registry.reruns.services.worker_keys);
    a key is rotated by registering a successor under a new name and revoking this one."""

    name = models.SlugField(max_length=100, unique=True)
    gpu_slug = models.SlugField(max_length=100)
    public_key = models.CharField(max_length=44, unique=True, help_text="base64 of the 32-byte Ed25519 key")
    cards = models.JSONField(default=list, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["gpu_slug", "name"]

    def __str__(self):
        return f"{self.name} (gpu.{self.gpu_slug}{', revoked' if self.revoked_at else ''})"
