"""Output serializers of the read API. Field names are part of the API contract: add, never rename."""

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry import rank_status
from registry.evidence import JobEvidence, RunEvidence, run_evidence_of
from registry.models import BenchmarkRun, Environment, Implementation, Kernel, Metric, Source, SourceImport
from registry.rank_status import IntervalBasis, RankStatus


class ControlledJobSerializer(serializers.Serializer):
    """One controlled job's evidence (registry.evidence.JobEvidence): for a measure job its
    samples and precision; for a rerun also its verdict and what each side rests on."""

    job = serializers.IntegerField(source="job.pk")
    kind = serializers.CharField(source="job.kind")
    state = serializers.CharField(source="job.state")
    url = serializers.CharField(source="job.get_absolute_url")
    median = serializers.FloatField(source="job.median", allow_null=True)
    ci_low = serializers.FloatField(
        source="job.ci_low", allow_null=True, help_text="95% interval of the median."
    )
    ci_high = serializers.FloatField(source="job.ci_high", allow_null=True)
    sample_count = serializers.IntegerField(
        help_text="Samples the figures and verdicts rest on; for peak memory, upstream's peaks."
    )
    readings_inside_passes = serializers.IntegerField(
        help_text="Peak memory: allocator readings that code inside a pass took (torch.compile "
        "compiling), not upstream after it; not samples."
    )
    upstream_warmup = serializers.CharField(
        help_text="What the benchmark script's own warm-up ran before the job's setup (fused_moe's "
        "liger autotune at the model's base T); blank when none ran."
    )
    compiled_for = serializers.CharField(
        help_text="A compiled KernelBench job: the input sizes TorchDynamo compiled its program for "
        '("its own input sizes", or symbolic sizes carried over from another problem in the worker '
        "process); blank where none is recorded."
    )
    missed_upstream_warmup = serializers.BooleanField(
        help_text="A measurement taken before the harness ran its script's own warm-up: Triton "
        "autotuned its config at another workload than upstream's; the sweep measures it again."
    )
    precision = serializers.FloatField(
        allow_null=True, help_text="Relative half-width of the 99% interval of the median reached."
    )
    target_precision = serializers.FloatField(allow_null=True)
    stop = serializers.CharField(help_text='"precision", "budget" or "count"; blank when not recorded.')
    throttled = serializers.ListField(child=serializers.CharField(), help_text="NVML slow-down reasons seen.")
    same_gpu = serializers.BooleanField(
        allow_null=True, help_text="A rerun: whether it ran on the card that measured the run."
    )
    serial_correlation = serializers.FloatField(
        allow_null=True,
        help_text="Lag-1 autocorrelation of the samples (each against the next); null for memory "
        "peaks or fewer than 10 samples. Above 0.3 the precision overstates what the job pins down.",
    )
    host_paced_samples = serializers.IntegerField(
        allow_null=True,
        help_text="Samples whose call took the host longer to queue than the spin ahead of it "
        "lasted: the GPU may have waited on the host, so their times include the host's pace. "
        "Null where not recorded (CPU jobs; GPU jobs before 2026-12-04).",
    )
    median_host_paced = serializers.BooleanField(
        help_text="Half the samples or more host-paced: the median (the run's figure, and what "
        "verdicts compare) includes the host's pace."
    )
    host_queue_ms = serializers.FloatField(
        allow_null=True, help_text="Median time the host took to queue one timed call, ms."
    )
    spin_ms = serializers.FloatField(
        allow_null=True, help_text="How long the spin ahead of each sample lasted, ms."
    )
    spin_capped = serializers.BooleanField(
        help_text="A GPU job recorded without host_paced_samples whose spin reached its 20 ms cap: "
        "the host took at least 10 ms to queue one call, and the spin may not have covered it."
    )
    upstream = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        allow_null=True,
        help_text="Upstream do_bench's own median, p20, p80.",
    )
    verdict = serializers.CharField(help_text="agrees, disagrees, inconclusive; blank for a measure job.")
    deviation = serializers.FloatField(source="job.deviation", allow_null=True)
    deviation_low = serializers.FloatField(source="job.deviation_low", allow_null=True)
    deviation_high = serializers.FloatField(source="job.deviation_high", allow_null=True)
    tolerance = serializers.FloatField(allow_null=True)
    recorded_sample_count = serializers.IntegerField(
        allow_null=True, help_text="Samples on the recorded side; null when it has none (a published figure)."
    )
    verdict_note = serializers.CharField(source="job.verdict_note")
    verdict_class = serializers.CharField(
        help_text='The verdict model\'s class ("latency|1–10 ms|below the power cap"; "latency|waits on the host|'
        '1–10 ms"; "latency|timed on two kinds of host|1–10 ms"; "latency|host-bound", the ops the host paces); '
        "blank for a verdict under the fixed tolerance (memory, older protocols)."
    )
    class_words = serializers.CharField(help_text='The class in words: "1–10 ms ops below the power cap".')
    margin_from = serializers.CharField(
        help_text="Where the margin (`tolerance`) came from: the pairs of KernelIndex's cards it was "
        "measured on (how far apart 95 in 100 of them put the same workload's median)."
    )
    disagree_beyond = serializers.FloatField(
        allow_null=True,
        help_text="How far the whole interval had to lie to disagree: the upper end of the margin's "
        "distribution-free 95% interval (a rerun is called out of line only beyond what the fleet's "
        "95th percentile could be); null under the fixed tolerance or for a verdict judged before 2026-12-07.",
    )
    verdict_confidence = serializers.FloatField(
        allow_null=True,
        help_text="The confidence of the interval (`deviation_low`, `deviation_high`) the verdict read: 0.9 "
        "for the verdict model (the two one-sided tests at 5%), 0.95 for one it judged before 2026-12-07; "
        "null under the fixed tolerance (a 95% interval).",
    )
    verdict_summary = serializers.CharField(
        help_text='The verdict in words: "agrees: +0.30% (90% interval …), within the ±3.1% that two '
        'H200 cards differ on 1–10 ms ops below the power cap".'
    )
    host_bound = serializers.BooleanField(
        help_text="The figure includes the host's pace (a wait on the host in the timed pass, half the "
        "calls host-paced, or the spin at its cap): judged in a class of its own, never counted in the "
        "GPU's agreement."
    )
    host_paced = serializers.BooleanField(
        help_text="The host sets the figure's pace (a Python loop in the timed pass, or half the calls "
        "host-paced): its class never makes a run reproduced. False where the pass only waits on the "
        "host once a call: that class may."
    )
    host_bound_reason = serializers.CharField(
        help_text="Why, naming the calls from upstream's code; blank if not."
    )


class JobEvidenceFields(serializers.Serializer):
    """The verdict fields the jobs API adds to a job's own columns, read from its JSON."""

    FIELDS = ["sample_count", "precision", "target_precision", "stop", "throttled", "same_gpu"]
    sample_count = serializers.SerializerMethodField()
    precision = serializers.SerializerMethodField()
    target_precision = serializers.SerializerMethodField()
    stop = serializers.SerializerMethodField()
    throttled = serializers.SerializerMethodField()
    same_gpu = serializers.SerializerMethodField()

    def get_sample_count(self, job) -> int:
        return JobEvidence(job).sample_count

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_precision(self, job):
        return JobEvidence(job).precision

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_target_precision(self, job):
        return JobEvidence(job).target_precision

    def get_stop(self, job) -> str:
        return JobEvidence(job).stop

    def get_throttled(self, job) -> list[str]:
        return JobEvidence(job).throttled

    @extend_schema_field(serializers.BooleanField(allow_null=True))
    def get_same_gpu(self, job):
        return JobEvidence(job).same_gpu


class SpeedOfLightCeilingSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["datasheet", "measured"])
    product = serializers.CharField()
    bandwidth_gbs = serializers.FloatField(help_text="Memory bandwidth, GB/s (10^9 bytes/s).")
    bandwidth_source = serializers.CharField(help_text="The datasheet's URL, or the measurement.")
    tflops = serializers.FloatField(help_text="Dense tensor throughput at the run's dtype, TFLOP/s.")
    tflops_source = serializers.CharField()
    floor_ms = serializers.FloatField(help_text="max(bytes / bandwidth, FLOPs / throughput), in ms.")
    bound = serializers.ChoiceField(choices=["memory", "compute"], help_text="Which term sets the floor.")
    percent = serializers.FloatField(help_text="floor / measured median × 100; above 100 is impossible.")


class SpeedOfLightSerializer(serializers.Serializer):
    """The run's speed of light (registry/speed_of_light.py); fields absent where they do not apply."""

    countable = serializers.BooleanField(help_text="Whether the kernel's work is counted for this pass.")
    reason = serializers.CharField(required=False, help_text="Why there is no percentage.")
    metric = serializers.ChoiceField(choices=Metric.choices, required=False)
    dtype = serializers.CharField(required=False)
    bytes = serializers.IntegerField(required=False, help_text="Least bytes the pass must move.")
    flops = serializers.IntegerField(required=False, help_text="FLOPs the pass must do.")
    live_bytes = serializers.IntegerField(
        required=False,
        help_text="Bytes of the forward's inputs, live through any pass: a memory run's floor.",
    )
    floor_mib = serializers.FloatField(required=False, help_text="A memory run's floor, MiB.")
    percent = serializers.FloatField(required=False, help_text="A memory run's floor / peak × 100.")
    ceilings = SpeedOfLightCeilingSerializer(many=True, required=False)

    def to_representation(self, instance):
        # null until computed: a run written before its speed of light was (load_bundled_data
        # and every import compute it).
        return super().to_representation(instance) if instance else None


class UnsettledSerializer(serializers.Serializer):
    """A run whose every judged rerun on another card than the measurement's is `inconclusive`."""

    reruns = serializers.IntegerField(help_text="Its inconclusive reruns on other cards.")
    sweep_reruns_again = serializers.BooleanField(
        help_text="Whether a later sweep reruns it on another card: it does until a run has had "
        "SETTLE_MAX (3) such verdicts."
    )


class RunListSerializer(serializers.ListSerializer):
    """Reads the standing of every run of the list at once (rank_status.attach: two queries)."""

    def to_representation(self, data):
        return super().to_representation(rank_status.attach(data.all() if hasattr(data, "all") else data))


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
    # The primary statistic as the protocol names it ("median", or "mean" for KernelBench, whose
    # `median` field holds the mean); p20 and p80 are null where the source published no quantiles.
    statistic = serializers.CharField(source="protocol.statistic", read_only=True)
    p20 = serializers.FloatField(read_only=True, allow_null=True)
    p80 = serializers.FloatField(read_only=True, allow_null=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    manifest_url = serializers.SerializerMethodField()
    measurement = serializers.SerializerMethodField()
    reruns = serializers.SerializerMethodField()
    unsettled = serializers.SerializerMethodField()
    host_bound = serializers.SerializerMethodField(
        help_text="The run's figure includes the host's pace (its measurement waits on the host inside the "
        "timed pass): its reruns are judged in a class of their own and never count in the GPU's agreement."
    )
    host_paced = serializers.SerializerMethodField(
        help_text="The host sets the pace of the run's figure: no rerun makes it reproduced."
    )
    host_bound_reason = serializers.SerializerMethodField(help_text="Why, naming the calls; blank if not.")
    pooled = serializers.SerializerMethodField(
        help_text="Where three cards or more measured the workload: the measurement against the pooled "
        "median of the other cards (deviation, 95% interval low/high, verdict against the class's "
        "margin, words). Shown beside the reruns' verdicts; it never sets the evidence level."
    )
    card_spread = serializers.SerializerMethodField(
        help_text="How far apart the cards that measured the workload put its median: cards, low, high "
        "(offsets from the median of the cards' medians) and each card's offset by UUID prefix."
    )
    speed_of_light = SpeedOfLightSerializer(read_only=True, allow_null=True)
    sol_percent = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Percentage of the speed of light against the datasheet ceiling (a memory run: of its "
        "memory floor); null when not counted.",
    )
    sol_percent_measured = serializers.FloatField(
        read_only=True, allow_null=True, help_text="The same against KernelIndex's measured ceiling."
    )
    implausible = serializers.BooleanField(
        read_only=True,
        help_text="Above 100% of the datasheet speed of light, or a peak below the memory floor. The "
        "evidence level is unchanged; the run is never the best of its group.",
    )
    # What the data supports beside the rank (registry/rank_status.py).
    rank_status = serializers.ChoiceField(
        source="standing.status",
        choices=RankStatus.choices,
        read_only=True,
        help_text="ahead: the group's best plausible run (the #1 unless that is implausible), ahead of "
        "the next plausible one beyond both runs' intervals; behind: behind the best plausible run "
        "beyond both intervals; tied: the intervals overlap (the best plausible run: with the next "
        "one's); one-sample: this run or the run compared with is one timed call (p20 = p50 = p80), "
        "so the order is not established; alone (or the only plausible run of its group); "
        "implausible: this run is implausible and compared with no run; unranked (withdrawn or "
        "superseded).",
    )
    rank_statement = serializers.CharField(
        source="standing.statement", read_only=True, help_text="The same in words, with what it rests on."
    )
    rank_interval_low = serializers.FloatField(
        source="standing.spread.low",
        read_only=True,
        allow_null=True,
        help_text="Where this run's median lies, low end: the p20–p80 range of a source run, the 95% "
        "interval of the median of a controlled run's samples; null for one timed call.",
    )
    rank_interval_high = serializers.FloatField(
        source="standing.spread.high", read_only=True, allow_null=True
    )
    rank_interval_basis = serializers.ChoiceField(
        source="standing.spread.basis", choices=IntervalBasis.choices, read_only=True
    )
    rank_compared_with = serializers.IntegerField(
        source="standing.compared_id",
        read_only=True,
        allow_null=True,
        help_text="The run this one is compared with: its group's best plausible run (the #1 unless that "
        "is implausible), or for that run the next plausible one; null for an implausible run.",
    )
    rank_difference = serializers.FloatField(
        source="standing.difference",
        read_only=True,
        allow_null=True,
        help_text="(this median − that run's) / that run's median.",
    )
    rank_difference_low = serializers.FloatField(
        source="standing.low",
        read_only=True,
        allow_null=True,
        help_text="The interval of rank_difference the two runs' intervals allow; null unless ahead or behind.",
    )
    rank_difference_high = serializers.FloatField(source="standing.high", read_only=True, allow_null=True)

    class Meta:
        model = BenchmarkRun
        list_serializer_class = RunListSerializer
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
            "statistic",
            "median",
            "p20",
            "p80",
            "source_metrics",
            "observed_at",
            "rank",
            "group_size",
            "rank_status",
            "rank_statement",
            "rank_interval_low",
            "rank_interval_high",
            "rank_interval_basis",
            "rank_compared_with",
            "rank_difference",
            "rank_difference_low",
            "rank_difference_high",
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
            "measurement",
            "reruns",
            "unsettled",
            "host_bound",
            "host_paced",
            "host_bound_reason",
            "pooled",
            "card_spread",
            "speed_of_light",
            "sol_percent",
            "sol_percent_measured",
            "implausible",
        ]

    def to_representation(self, run):
        data = super().to_representation(run)
        if data.get("statistic") == "mean":
            data["p20"] = data["p80"] = None  # not published: the columns only repeat the mean
        return data

    def _evidence(self, run) -> RunEvidence:
        """One run (the API's retrieve): what its read model read (registry/run_page.py, in the
        context as `run_page`); a list's runs: their prefetched jobs (evidence.with_jobs)."""
        page = self.context.get("run_page")
        return page.controlled if page is not None and page.run is run else run_evidence_of(run)

    def get_manifest_url(self, run) -> str:
        return reverse("manifest-detail", args=[run.digest])

    @extend_schema_field(ControlledJobSerializer(allow_null=True))
    def get_measurement(self, run):
        """The controlled job that measured this run (null for a run from a source)."""
        measurement = self._evidence(run).measurement
        return ControlledJobSerializer(measurement).data if measurement else None

    @extend_schema_field(ControlledJobSerializer(many=True))
    def get_reruns(self, run):
        """Its finished controlled reruns, newest first, each with its verdict."""
        return ControlledJobSerializer(self._evidence(run).reruns, many=True).data

    def get_host_bound(self, run) -> bool:
        return bool(self._evidence(run).host_bound_reason)

    def get_host_paced(self, run) -> bool:
        return self._evidence(run).host_paced

    def get_host_bound_reason(self, run) -> str:
        return self._evidence(run).host_bound_reason

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_pooled(self, run):
        return self._evidence(run).pooled

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_card_spread(self, run):
        return self._evidence(run).card_spread

    @extend_schema_field(UnsettledSerializer(allow_null=True))
    def get_unsettled(self, run):
        """Set when every judged rerun on another card is inconclusive (null otherwise)."""
        evidence = self._evidence(run)
        if not evidence.unsettled:
            return None
        return {"reruns": len(evidence.unsettled), "sweep_reruns_again": not evidence.unsettled_for_good}


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
