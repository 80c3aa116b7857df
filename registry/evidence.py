"""What a controlled job's evidence says, read for the run page and the APIs, and the registry's
queries of the rerun app's jobs (the run page's read model, registry/run_page.py, reads a run's
jobs through `run_jobs`). Nothing here draws: registry/sampleplot.py does.

A job's `samples`, `sampling`, `gpu_state` and `upstream` are JSON written by a GPU worker
(docs/protocol.md). They are read here defensively, once: a value of the wrong type (a string
where a number belongs, a list where a mapping does) reads as unknown, never as an error, so a
malformed or hostile document cannot break a page; templates escape whatever text remains.
"""

import math
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from django.db.models import Exists, OuterRef, Prefetch, Q

from registry.models import BenchmarkRun, Metric
from registry.reruns.harness import missed_upstream_warmup
from registry.reruns.harness.timing import LEAD_CAP_CYCLES, LEAD_MAX_S, median_host_paced
from registry.reruns.judged import judged_interval, judged_samples
from registry.reruns.judgement import SETTLE_MAX, settle_reruns_left, verdict_model_for
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.stats import intervals, verdict_model

# The job columns the run page and the run API never show (a measure job's log runs to kB).
UNSHOWN_JOB_FIELDS = ("log", "protocol", "lease", "reason", "worker_host")
# The API's lists of runs (`with_jobs`) also leave out the environment, which only the run page
# reads, of its measure job (the torch a reproduction needs).
UNLISTED_JOB_FIELDS = (*UNSHOWN_JOB_FIELDS, "environment")
STOP_REASONS = {
    "precision": "stopped on precision: the 99% interval of the median reached the target",
    "budget": "stopped on the time budget before reaching the target precision",
    "count": "a fixed number of runs (memory: upstream's definition, not sampled to a precision)",
}
# Lag-1 autocorrelation above which a job's page says its consecutive samples move together: a
# third of the shipped H200 latency jobs are above it (docs/protocol.md, "What settles").
SERIAL_NOTE = 0.3
SERIAL_MIN_SAMPLES = 10
GPU_READINGS = (
    ("sm_clock_mhz", "SM clock", "MHz"),
    ("memory_clock_mhz", "memory clock", "MHz"),
    ("temperature_c", "temperature", "°C"),
    ("power_w", "power", "W"),
)


def number(value) -> float | None:
    """A finite number, or None (booleans and numeric strings are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def words(value) -> list[str]:
    """A list of short labels (throttle reasons); anything else reads as none."""
    if not isinstance(value, list):
        return []
    return [str(item)[:80] for item in value if isinstance(item, str | int | float) and str(item)]


@dataclass
class GpuReading:
    """One row of the GPU-state table: a block's readings while it was timed (each figure's least,
    median and most), or, for a job recorded before the harness sampled through the timing, one
    reading taken before the setup or after the pass."""

    when: str
    values: list[dict] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, when: str, state) -> "GpuReading | None":
        state = mapping(state)
        if not state:
            return None
        values = [
            {"name": name, "value": number(state.get(key)), "low": None, "high": None, "unit": unit}
            for key, name, unit in GPU_READINGS
        ]
        return cls(when=when, values=values, reasons=words(state.get("reasons")))

    @classmethod
    def of_block(cls, index: int, state) -> "GpuReading | None":
        state = mapping(state)
        if not state:
            return None
        values = []
        for key, name, unit in GPU_READINGS:
            figures = mapping(state.get(key))
            low, high = number(figures.get("min")), number(figures.get("max"))
            values.append(
                {"name": name, "value": number(figures.get("median")), "low": low, "high": high, "unit": unit}
            )
        shares = mapping(state.get("reasons"))
        reasons = [
            f"{reason} ({share:.0%} of readings)"
            for reason, share in ((str(k)[:80], number(v)) for k, v in shares.items())
            if share is not None
        ]
        count, hz = number(state.get("readings")), number(state.get("hz"))
        rate = f": {count:.0f} readings at {hz:.0f} Hz" if count is not None and hz is not None else ""
        error = str(state.get("error") or "")[:300]
        return cls(
            when=f"block {index + 1}, while timed{rate}{' (' + error + ')' if error else ''}",
            values=values,
            reasons=reasons,
        )


class JobEvidence:
    """One job's evidence: its samples, how sampling stopped, the GPU's state, upstream's figure,
    and for a rerun its verdict and what each side of it rests on."""

    # The spin's cap, and the least time to queue one call that reaches it (the spin is twice that).
    spin_cap_ms = LEAD_MAX_S * 1000
    capped_queue_ms = spin_cap_ms / 2

    def __init__(
        self, job: RerunJob, *, run: BenchmarkRun | None = None, measure: "JobEvidence | None" = None
    ):
        self.job = job
        self.run = run
        self.measure = measure
        self.sampling = mapping(job.sampling)
        self.gpu_state = mapping(job.gpu_state)
        self.upstream_raw = mapping(job.upstream)

    @cached_property
    def readings(self) -> list[float]:
        raw = self.job.samples if isinstance(self.job.samples, list) else []
        return [v for v in (number(s) for s in raw) if v is not None]

    @cached_property
    def samples(self) -> list[float]:
        """What the job's figures and verdicts rest on: for a memory job, upstream's peaks only
        (judged.judged_samples), as the verdict judges them."""
        return judged_samples(self.job.metric, self.readings, self.upstream_raw)

    @property
    def sample_count(self) -> int:
        return len(self.samples)

    @property
    def label(self) -> str:
        """How the sample plot names the job: "measured, job #12", "rerun, job #13"."""
        return f"{'measured' if self.job.kind == JobKind.MEASURE else 'rerun'}, job #{self.job.pk}"

    @property
    def median(self) -> float | None:
        return number(self.job.median)

    @property
    def ci_low(self) -> float | None:
        """The 95% interval of the median, as the recorder stored it."""
        return number(self.job.ci_low)

    @property
    def ci_high(self) -> float | None:
        return number(self.job.ci_high)

    @property
    def readings_inside_passes(self) -> int:
        """Allocator readings that code inside a memory pass took (torch.compile), not upstream:
        kept apart by the harness, or, in a job recorded before it did, left out of the samples."""
        apart = self.sampling.get("readings_inside_passes_mb")
        return (len(apart) if isinstance(apart, list) else 0) + len(self.readings) - len(self.samples)

    @property
    def upstream_warmup(self) -> str:
        """What the script's own warm-up ran before the job's setup (liger.harness.KernelMap
        .warmup: fused_moe's liger autotune at the model's base T), or ""."""
        ran = self.sampling.get("upstream_warmup")
        return ran if isinstance(ran, str) else ""

    @property
    def compiled_for(self) -> str:
        """For a compiled KernelBench job, the input sizes TorchDynamo compiled its program for
        (`sampling.program`: the harness's reading, or the shipped sweep files' replay), in a
        visitor's words; "" where none is recorded."""
        program = self.sampling.get("program")
        if not isinstance(program, dict) or not isinstance(program.get("sizes"), dict):
            return ""
        if not program.get("dynamic"):
            return "its own input sizes"
        symbolic = ", ".join(
            f"{source} {sizes if isinstance(sizes, str) else list(sizes)}"
            for source, sizes in program["sizes"].items()
        )
        return (
            "symbolic input sizes, carried over by TorchDynamo from another problem compiled earlier in the "
            f"same worker process ({symbolic}; s: a symbolic size): a program for any size, not this "
            "problem's own"
        )

    @property
    def missed_upstream_warmup(self) -> bool:
        """A measurement of a kernel and provider whose script warms up before its sweep, taken
        before the harness ran that warm-up: Triton's autotuner chose its config elsewhere."""
        return (
            self.run is not None
            and self.job.kind == JobKind.MEASURE
            and missed_upstream_warmup(self.run.kernel.slug, self.job.provider, self.sampling)
        )

    @property
    def precision(self) -> float | None:
        return number(self.sampling.get("precision"))

    @property
    def target_precision(self) -> float | None:
        return number(self.sampling.get("target_precision"))

    @property
    def confidence(self) -> float | None:
        return number(self.sampling.get("confidence"))

    @property
    def stop(self) -> str:
        stop = self.sampling.get("stop")
        return stop if stop in STOP_REASONS else ""

    @property
    def stop_explanation(self) -> str:
        return STOP_REASONS.get(self.stop, "")

    @property
    def reached_target(self) -> bool | None:
        if self.precision is None or self.target_precision is None:
            return None
        return self.precision <= self.target_precision

    @cached_property
    def serial_correlation(self) -> float | None:
        """The lag-1 autocorrelation of a timed job's samples, each against the next (scipy's
        Pearson r); None for memory peaks, fewer than SERIAL_MIN_SAMPLES or constant ones."""
        values = self.samples
        if self.job.metric != Metric.LATENCY or len(values) < SERIAL_MIN_SAMPLES:
            return None
        earlier, later = values[:-1], values[1:]
        if min(earlier) == max(earlier) or min(later) == max(later):
            return None
        from scipy import stats  # here, not with the module (registry/stats/medians.py says why)

        with warnings.catch_warnings():  # near-constant or overflowing samples: no r, no noise
            warnings.simplefilter("ignore")
            r = float(stats.pearsonr(earlier, later).statistic)
        return r if math.isfinite(r) else None

    @property
    def samples_move_together(self) -> bool:
        """Consecutive samples that move together: the order-statistic precision, which counts
        each call as independent, overstates what the job pins down (the verdicts use batches)."""
        return self.serial_correlation is not None and self.serial_correlation > SERIAL_NOTE

    @property
    def host_paced_samples(self) -> int | None:
        """Samples whose call took the host longer to queue than the spin ahead of it lasted
        (timing._host_pace), so that the GPU may have waited on the host; None where the job did
        not record it (CPU jobs, and GPU jobs before 2026-12-04)."""
        count = self.sampling.get("host_paced_samples")
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None

    @property
    def median_host_paced(self) -> bool:
        """The median, which the run's figure and its verdicts rest on, includes the host's pace
        (timing.median_host_paced); False where the job did not record it."""
        paced = self.host_paced_samples
        return paced is not None and median_host_paced(paced, self.sample_count)

    @property
    def host_queue_ms(self) -> float | None:
        return number(self.sampling.get("host_queue_ms"))

    @property
    def spin_ms(self) -> float | None:
        return number(self.sampling.get("spin_ms"))

    @property
    def spin_capped(self) -> bool:
        """A GPU job without the host's queueing per call whose spin reached its cap: the host
        took at least half of LEAD_MAX_S to queue one call, so the spin may not have covered it."""
        lead = number(self.sampling.get("lead_cycles"))
        return self.host_paced_samples is None and lead is not None and lead >= LEAD_CAP_CYCLES

    @property
    def same_gpu(self) -> bool | None:
        same = self.sampling.get("same_gpu")
        return same if isinstance(same, bool) else None

    @property
    def basis(self) -> str:
        basis = self.sampling.get("basis")
        return basis if basis in ("samples", "upstream") else ""

    @property
    def gpu_sampled(self) -> bool:
        """The harness read the card through the timing (timing.NvmlSampler), block by block."""
        return isinstance(self.gpu_state.get("blocks"), list)

    @property
    def gpu_stale_pair(self) -> bool:
        """An older job's two readings are identical: NVML had not refreshed between them, so
        neither shows this job's state."""
        before, after = self.gpu_state.get("before"), self.gpu_state.get("after")
        return isinstance(before, dict) and bool(before) and before == after

    @property
    def throttled(self) -> list[str]:
        """Slow-downs seen while this job was timed. An older job's reading before its setup often
        showed the previous job's power cap, and an identical pair showed nothing of its own: for
        those, only a reading after the pass that differs from the one before counts."""
        if self.gpu_sampled or "before" not in self.gpu_state:
            return words(self.gpu_state.get("throttled"))
        if self.gpu_stale_pair:
            return []
        reasons = words(mapping(self.gpu_state.get("after")).get("reasons"))
        return sorted(set(reasons) & set(words(self.gpu_state.get("throttled"))))

    @property
    def gpu_readings(self) -> list[GpuReading]:
        if self.gpu_sampled:
            readings = [GpuReading.of_block(i, state) for i, state in enumerate(self.gpu_state["blocks"])]
        elif self.gpu_stale_pair:
            readings = [
                GpuReading.of(
                    "before the setup and after the pass, identical: a reading NVML had not refreshed, "
                    "not the state while timed",
                    self.gpu_state.get("before"),
                )
            ]
        else:
            readings = [
                GpuReading.of("before the setup, not while timed", self.gpu_state.get("before")),
                GpuReading.of("after the pass, not while timed", self.gpu_state.get("after")),
            ]
        return [r for r in readings if r is not None]

    @property
    def upstream(self) -> dict | None:
        figures = {key: number(self.upstream_raw.get(key)) for key in ("median", "p20", "p80")}
        return figures if figures["median"] is not None else None

    @property
    def host_seconds(self) -> list[dict]:
        parts = (
            ("process_start_s", "process start"),
            ("setup_s", "setup"),
            ("upstream_s", "upstream's do_bench"),
            ("warmup_s", "warm-up"),
            ("timing_s", "timing"),
        )
        return [
            {"name": name, "seconds": number(self.sampling.get(key))}
            for key, name in parts
            if number(self.sampling.get(key)) is not None
        ]

    # --- a rerun's verdict -----------------------------------------------------------------------

    @property
    def deviation_interval(self) -> tuple[float, float] | None:
        low, high = number(self.job.deviation_low), number(self.job.deviation_high)
        return (low, high) if low is not None and high is not None else None

    @property
    def rerun_side(self) -> str:
        """What the rerun's side of the verdict rests on, in words."""
        if self.basis == "upstream":
            return "upstream's do_bench figure, " + _range_words(self.upstream)
        return _count_words(self.sample_count)

    @property
    def recorded_side(self) -> str:
        """What the recorded run's side rests on."""
        if self.basis == "samples" and self.measure is not None:
            return _count_words(self.measure.sample_count)
        run = self.run or self.job.run
        if run is None:
            return "unknown"
        figures = {"median": number(run.median), "p20": number(run.p20), "p80": number(run.p80)}
        return "the recorded median, " + _range_words(figures)

    @property
    def tolerance(self) -> float | None:
        return number(self.job.tolerance)

    @property
    def verdict(self) -> str:
        return self.job.verdict or ""

    @property
    def tolerance_text(self) -> str:
        """ "±2%"; "the tolerance" where the job recorded none."""
        return f"±{self.tolerance * 100:g}%" if self.tolerance is not None else "the tolerance"

    @property
    def deviation_text(self) -> str:
        """The difference of medians, "+1.90%"; "unknown" without one."""
        deviation = number(self.job.deviation)
        return "unknown" if deviation is None else percent(deviation)

    @property
    def model_account(self) -> dict:
        """The verdict model's account of this rerun (judgement.model_judgement): its class, the
        margin and where it came from, and why it is host-bound; {} under the fixed tolerance."""
        account = mapping(self.sampling.get("verdict_model"))
        return account if isinstance(account.get("verdict_class"), str) else {}

    @property
    def verdict_class(self) -> str:
        return self.model_account.get("verdict_class", "")

    @property
    def class_words(self) -> str:
        return str(self.model_account.get("class_words", ""))

    @property
    def margin_from(self) -> str:
        return str(self.model_account.get("margin_from", ""))

    @property
    def disagree_beyond(self) -> float | None:
        """How far the whole interval had to lie to disagree (the top of the margin's interval);
        None under the fixed tolerance or for a verdict judged before the model named it."""
        return number(self.model_account.get("disagree_beyond"))

    @property
    def verdict_confidence(self) -> float | None:
        """The confidence of the interval the verdict read; None under the fixed tolerance."""
        if not self.model_account:
            return None
        return number(self.model_account.get("confidence")) or intervals.CONFIDENCE

    @property
    def host_bound_reason(self) -> str:
        """Why this job's figure includes the host's pace: the rerun's stored account, or for a
        measure job the model's rule read from the job itself; "" when GPU-timed."""
        if self.model_account:
            return str(self.model_account.get("host_bound") or "")
        return self._measured_host_bound[1]

    @cached_property
    def _measured_host_bound(self) -> tuple[str, str]:
        """(kind, why) of a latency measure job by the model's rule, read from the job itself."""
        if self.run is None or self.job.kind != JobKind.MEASURE or self.job.metric != Metric.LATENCY:
            return "", ""
        return verdict_model.host_bound(
            kernel=self.run.kernel.slug,
            provider=self.job.provider,
            mode=self.job.operation_mode,
            sampling=self.sampling,
            sample_count=len(self.readings),
            samples=self.readings,
        )

    @property
    def host_bound(self) -> bool:
        return bool(self.host_bound_reason)

    @property
    def host_paced(self) -> bool:
        """The host sets this job's pace (its figure is the host's): judged in a class of its own
        that never makes a run `reproduced`. False for a job that waits on the host once a call."""
        if self.model_account:
            return verdict_model.is_paced(self.verdict_class)
        return self._measured_host_bound[0] == verdict_model.PACED

    @property
    def verdict_summary(self) -> str:
        """ "agrees: +0.30% (90% interval −0.40% to +1.00%), within the ±3.1% that two H200 cards
        differ on 1–10 ms ops below the power cap" (the interval the verdict read: the model's
        account names its confidence, 95% for a verdict judged before it did); under the fixed
        tolerance "… (95% interval …), within ±2%"."""
        deviation, interval, bound = number(self.job.deviation), self.deviation_interval, self.tolerance_text
        if self.model_account and deviation is not None and self.verdict:
            text = f"{self.verdict}: {percent(deviation)}"
            if interval:
                text += f" ({self.verdict_confidence:.0%} interval {percent(interval[0])} to {percent(interval[1])})"
            words = str(self.model_account.get("words", ""))
            return f"{text}, {words.split(': ', 1)[-1]}"
        if deviation is None:
            return "no result to compare"
        if not self.verdict:
            return f"no verdict: {percent(deviation)}, judged by the older fixed tolerance of {bound}"
        text = f"{self.verdict}: {percent(deviation)}"
        if interval:
            text += f" (95% interval {percent(interval[0])} to {percent(interval[1])})"
        relation = {
            "agrees": f"within {bound}",
            "disagrees": f"outside {bound}",
            "inconclusive": f"neither wholly within nor wholly outside {bound}",
        }
        return f"{text}, {relation.get(self.verdict, bound)}"

    @property
    def recorded_sample_count(self) -> int | None:
        if self.basis == "samples" and self.measure is not None:
            return self.measure.sample_count
        return None


def percent(fraction: float) -> str:
    """A relative difference as a signed percentage, with a true minus sign: −0.23%."""
    return f"{fraction * 100:+.2f}%".replace("-", "\u2212")


def _count_words(count: int) -> str:
    return f"{count:,} sample{'' if count == 1 else 's'}"


def _range_words(figures: dict | None) -> str:
    if not figures:
        return "no figure recorded"
    if figures["p20"] == figures["median"] == figures["p80"]:
        return "one timed call (p20 = p50 = p80)"
    return "its published p20–p80 range (no raw samples)"


@dataclass
class RunEvidence:
    """A run's controlled evidence: the job that measured it (a controlled run) and its reruns,
    newest first."""

    measurement: JobEvidence | None
    reruns: list[JobEvidence]

    @property
    def any(self) -> bool:
        return self.measurement is not None or bool(self.reruns)

    @property
    def unsettled(self) -> list[JobEvidence]:
        """The judged reruns on other cards than the measurement's, when every one of them is
        `inconclusive`: none says whether the run reproduces on another card."""
        elsewhere = [r for r in self.reruns if r.same_gpu is False and r.verdict]
        return elsewhere if settle_reruns_left([r.verdict for r in elsewhere]) is not None else []

    @property
    def settle_max(self) -> int:
        return SETTLE_MAX

    @property
    def host_bound_reason(self) -> str:
        """Why the run's figure includes the host's pace (its measurement's), or ""."""
        return self.measurement.host_bound_reason if self.measurement else ""

    @property
    def host_paced(self) -> bool:
        """The host sets the pace of the run's figure: no rerun makes it `reproduced`."""
        return bool(self.measurement and self.measurement.host_paced)

    @cached_property
    def cards(self) -> dict[str, intervals.MedianEstimate]:
        """Each physical card's median of the workload: the measurement's card, then each other
        card's first rerun (four samples or more)."""
        found = {}
        jobs = ([self.measurement] if self.measurement else []) + list(reversed(self.reruns))
        for evidence in jobs:
            card = evidence.job.gpu_uuid
            if card and card not in found and len(evidence.samples) >= 4 and min(evidence.samples) > 0:
                found[card] = intervals.median_estimate(
                    evidence.samples, block_ids=evidence.sampling.get("sample_blocks")
                )
        return found

    @property
    def card_spread(self) -> dict | None:
        """How far apart the cards that measured this workload put its median: each card's
        offset from the median of the cards' medians, and the range; None under two cards."""
        if len(self.cards) < 2:
            return None
        centre = sorted(e.log_median for e in self.cards.values())[len(self.cards) // 2]
        offsets = {card[:12]: math.expm1(e.log_median - centre) for card, e in self.cards.items()}
        return {
            "cards": len(offsets),
            "low": min(offsets.values()),
            "high": max(offsets.values()),
            "offsets": offsets,
        }

    @cached_property
    def pooled(self) -> dict | None:
        """Where three cards or more measured the workload: the measurement against the pooled
        median of the other cards, judged against the class's margin. Shown, never a level."""
        if self.measurement is None or len(self.cards) < 3 or self.measurement.job.gpu_uuid not in self.cards:
            return None
        account = next(
            (r.model_account for r in self.reruns if r.model_account and r.same_gpu is False), None
        )
        model = verdict_model_for(self.measurement.job.gpu_slug)
        params = model.parameters(account["verdict_class"]) if account and model else None
        if params is None or not math.isfinite(params.margin):  # no class, or no margin to judge by
            return None
        own = self.measurement.job.gpu_uuid
        others = [e for card, e in self.cards.items() if card != own]
        diff = intervals.pooled_difference(
            self.cards[own],
            others,
            process_variance=params.process_sd**2,
            process_df=params.process_df,
            confidence=model.verdict_confidence,
        )
        verdict = verdict_model.class_verdict(params, diff.low, diff.high)
        words = verdict_model.verdict_words(
            verdict, account["verdict_class"], params.margin, params.disagree_beyond, model.gpu_name
        )
        return {
            "cards": len(self.cards),
            "deviation": diff.point,
            "low": diff.low,
            "high": diff.high,
            "confidence": model.verdict_confidence,
            "verdict": verdict,
            "words": words,
        }

    @property
    def unsettled_for_good(self) -> bool:
        """As many such verdicts as a sweep asks for: no sweep reruns the run again."""
        return settle_reruns_left([r.verdict for r in self.unsettled]) == 0


def run_evidence(run: BenchmarkRun, jobs: list[RerunJob]) -> RunEvidence:
    """Build from `jobs` (the run's measure and rerun jobs, newest first), without a query."""
    finished = (JobState.SUCCEEDED, JobState.DIVERGED)
    measures = [
        j for j in jobs if j.kind == JobKind.MEASURE and j.result_run_id == run.pk and j.state in finished
    ]
    measurement = JobEvidence(measures[0], run=run) if measures else None
    reruns = [
        JobEvidence(j, run=run, measure=measurement)
        for j in jobs
        if j.kind == JobKind.RERUN and j.run_id == run.pk and j.state in finished
    ]
    return RunEvidence(measurement=measurement, reruns=reruns)


def run_jobs(run: BenchmarkRun) -> list[RerunJob]:
    """Every job of the run, with its samples, newest first: one query, for its evidence
    (`run_evidence`), its rerun history and what a reproduction of it needs."""
    return list(
        RerunJob.objects.filter(Q(run=run) | Q(result_run=run))
        .defer(*UNSHOWN_JOB_FIELDS)
        .order_by("-created_at", "-pk")
    )


def measure_jobs(pks=None):
    """The measure jobs that made runs (those of `pks`, ids or a subquery, where given): what each
    reader of a run's own measurement below starts from."""
    jobs = RerunJob.objects.filter(kind=JobKind.MEASURE)
    return jobs.filter(result_run__isnull=False) if pks is None else jobs.filter(result_run_id__in=pks)


def measured_samples(pks) -> dict[int, list[float]]:
    """Raw samples of controlled runs (their measure job's), by run: one query."""
    found = measure_jobs(pks).exclude(samples=[])
    rows = found.values_list("result_run_id", "samples", "metric", "upstream")
    return {
        run: judged_samples(metric, samples, upstream) if isinstance(samples, list) else samples
        for run, samples, metric, upstream in rows
        if samples
    }


def measured_intervals(pks) -> dict[int, tuple[float, float]]:
    """The stored judged interval of controlled runs' medians (their measure job's
    judged_ci_low/high), by run: one query of two numbers a run."""
    rows = measure_jobs(pks)
    return {
        run: (low, high)
        for run, low, high in rows.values_list("result_run_id", "judged_ci_low", "judged_ci_high")
        if low is not None and high is not None
    }


def measure_jobs_with_samples():
    """Every measure job of a run that holds samples, with its run's external id (verify_registry)."""
    fields = ("pk", "result_run_id", "result_run__external_id", "metric", "samples", "upstream")
    fields += ("judged_ci_low", "judged_ci_high")
    jobs = measure_jobs().exclude(samples=[])
    return jobs.select_related("result_run").only(*fields).order_by("pk").iterator(chunk_size=500)


def stored_interval_of(job: RerunJob) -> tuple[tuple, tuple]:
    """(stored, derived) judged interval of a job."""
    return (job.judged_ci_low, job.judged_ci_high), judged_interval(job.metric, job.samples, job.upstream)


def with_jobs(runs):
    """`runs` with their measure and rerun jobs prefetched (two queries, whatever the number of
    runs), for `run_evidence_of`."""
    jobs = RerunJob.objects.defer(*UNLISTED_JOB_FIELDS).order_by("-created_at", "-pk")
    return runs.prefetch_related(
        Prefetch("rerun_jobs", queryset=jobs), Prefetch("measured_by_jobs", queryset=jobs)
    )


def run_evidence_of(run: BenchmarkRun) -> RunEvidence:
    """The evidence of a run read through `with_jobs` (without it, two queries per run)."""
    cached = getattr(run, "_controlled_evidence", None)
    if cached is None:
        jobs = sorted(
            [*run.measured_by_jobs.all(), *run.rerun_jobs.all()],
            key=lambda j: (j.created_at, j.pk),
            reverse=True,
        )
        cached = run._controlled_evidence = run_evidence(run, jobs)
    return cached


def with_host_bound(runs):
    """`runs` annotated with `host_bound`: whether any of a run's reruns was judged in the
    host-bound class (its figure includes the host's pace). A subquery, no query of its own."""
    bound = RerunJob.objects.filter(run=OuterRef("pk"), sampling__verdict_model__host_bound__gt="")
    return runs.annotate(host_bound=Exists(bound))
