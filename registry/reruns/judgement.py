"""The verdict on new figures of a run's workload, judged against the run under the run's own
protocol: one function for a controlled rerun (services/record.py) and for a contributor's
result file (attestations/services.py). Imports no service, so both can use it.
"""

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from registry.models import BenchmarkRun, Metric, Verdict
from registry.reruns.harness import MEMORY_FAMILY
from registry.reruns.judged import judged_samples
from registry.reruns.models import JobKind, RerunJob
from registry.stats import intervals, medians, verdict_model

MODEL_DIR = Path(__file__).resolve().parent.parent / "data"
MODEL_FAMILY = "kernelindex/cuda-v1"  # the protocol whose latency reruns the verdict model judges

SAMPLES_LIMIT = 20_000  # the most samples one result may carry
# A run whose reruns on other cards were all `inconclusive` is rerun once more by a later sweep,
# until it has this many such verdicts; then it stays inconclusive, its page saying so.
SETTLE_MAX = 3
# Runs whose own samples a rerun is compared with (KernelIndex's protocols).
CONTROLLED_FAMILIES = (
    "kernelindex/cuda-v1",
    "kernelindex/cpu-v1",
    "kernelindex/liger-peak-memory",
    MEMORY_FAMILY,
)


@dataclass(frozen=True)
class Judgement:
    """New figures of a run's workload judged against the run, under the run's own protocol."""

    basis: str  # "samples" (both sides' raw samples) or "upstream" (upstream's do_bench figure)
    new: medians.Side
    old: medians.Side
    deviation: float | None
    low: float | None
    high: float | None
    how: str
    verdict: str
    tolerance: float | None  # None: a model class with too few pairs of cards for a margin
    measured_by: RerunJob | None
    # The verdict model's account (verdict_class, class_words, margin, margin_from, host_bound,
    # words), for a cuda-v1 latency rerun judged by it; None under the fixed tolerance.
    model: dict | None = None


UNREAD = object()  # `measured_by` not given: run_judgement reads it


def run_judgement(
    run: BenchmarkRun,
    *,
    samples: list,
    upstream: dict | None,
    figures: tuple,
    job_state: dict | None = None,
    measured_by: RerunJob | None = UNREAD,
) -> Judgement:
    """The verdict: an equivalence judgement on the relative difference of the two medians, its
    95% interval against ±RERUN_TOLERANCE (docs/protocol.md). A run is judged under its own
    protocol: a KernelIndex-protocol run by the new samples against its measure job's; any other
    run (the source's, or an older controlled protocol) by the new upstream do_bench figure
    (`figures`, median / p20 / p80 of the samples, without one). A controlled rerun and a
    contributor's result file are judged by this one function. `measured_by`: the run's measure
    job (`run_measured_by`) where the caller read every run's at once (judging thousands again)."""
    if measured_by is UNREAD:
        measured_by = run_measured_by(run)
    own_protocol = run.protocol.comparability_family in CONTROLLED_FAMILIES and measured_by is not None
    by_model = own_protocol and model_judgement(run, measured_by, samples=samples, job_state=job_state or {})
    if by_model:
        return by_model
    if own_protocol and len(measured_by.samples) >= 2 and len(samples) >= 2:
        new = medians.Side(samples=judged_samples(run.metric, samples, upstream))
        old = medians.Side(samples=judged_samples(run.metric, measured_by.samples, measured_by.upstream))
        basis = "samples"
    else:
        upstream = upstream or dict(zip(("median", "p20", "p80"), figures, strict=True))
        new, old, basis = (
            medians.Side(**upstream),
            medians.Side(median=run.median, p20=run.p20, p80=run.p80),
            "upstream",
        )
    point, low, high, how = difference_interval(new, old, metric=run.metric, spread_from=samples)
    tolerance = settings.RERUN_TOLERANCE
    return Judgement(
        basis, new, old, point, low, high, how, medians.verdict(low, high, tolerance), tolerance, measured_by
    )


def run_measured_by(run: BenchmarkRun) -> RerunJob | None:
    """The measure job that created `run` (its first, should there be several), None for a run
    KernelIndex did not measure."""
    return run.measured_by_jobs.filter(kind=JobKind.MEASURE).order_by("pk").first()


# The modules whose code decides a rerun's verdict and what it does to its run's level.
RULE_MODULES = (
    "registry.reruns.judgement",
    "registry.reruns.judged",
    "registry.reruns.models",
    "registry.reruns.services.record",
    "registry.stats.intervals",
    "registry.stats.medians",
    "registry.stats.verdict_model",
)


def judgement_rule() -> str:
    """A digest of everything a verdict depends on besides the job, its run and the run's
    measure job (whose figures never change once recorded): the source of RULE_MODULES, the
    shipped verdict models, numpy's and scipy's versions and RERUN_TOLERANCE. A rerun stamped
    with it (`RerunJob.judged_under`) would be judged the same again, so `reruns_rejudge` may pass
    it over; a change to any of them changes the digest, and every rerun is judged again."""
    return hashlib.sha256(f"{_rule_of_code()}:{settings.RERUN_TOLERANCE!r}".encode()).hexdigest()


@functools.cache
def _rule_of_code() -> str:
    digest = hashlib.sha256()
    for name in RULE_MODULES:
        digest.update(Path(importlib.util.find_spec(name).origin).read_bytes())
    for path in sorted(MODEL_DIR.glob("verdict-model-*.json")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in ("numpy", "scipy"):
        digest.update(f"{package}=={importlib.metadata.version(package)}".encode())
    return digest.hexdigest()


@functools.cache
def verdict_model_for(gpu_slug: str) -> verdict_model.Model | None:
    """The verdict model of a GPU model (registry/data/verdict-model-<gpu>.json, written by
    scripts/controlled_figures.py --write-model), None where none is shipped."""
    path = MODEL_DIR / f"verdict-model-{gpu_slug}.json"
    if not path.is_file():
        return None
    return verdict_model.Model.from_json(json.loads(path.read_text()))


def model_judgement(
    run: BenchmarkRun, measured_by: RerunJob, *, samples: list, job_state: dict
) -> Judgement | None:
    """The verdict model's judgement of a cuda-v1 latency rerun (registry/stats/verdict_model.py):
    the class from the measurement and the rerun (band of the run's median, either at the power
    cap, either host-bound), the interval with the class's between-process component, the class's
    margin. None where the model does not apply (another protocol or metric, no model for the GPU,
    fewer than four samples on a side): the fixed tolerance judges those."""
    model = verdict_model_for(run.environment.slug if run.environment_id else "")
    if (
        model is None
        or run.metric != Metric.LATENCY
        or run.protocol.comparability_family != MODEL_FAMILY
        or len(samples) < 4
        or len(measured_by.samples) < 4
    ):
        return None
    key, why = job_class(run, measured_by, samples=samples, job_state=job_state)
    new = intervals.median_estimate(samples, block_ids=(job_state.get("sampling") or {}).get("sample_blocks"))
    old = measured_by.median_estimate
    judged = verdict_model.judge(model, key, new, old, gpu_name=gpu_short_name(run))
    if judged is None:
        return None
    params = model.parameters(key)  # None: a class no margin applies to (two compiled programs)
    diff = judged.difference
    margin = params.margin if params and math.isfinite(params.margin) else None  # None: no margin
    account = {
        "verdict_class": key,
        "class_words": verdict_model.class_words(key),
        "margin": margin,
        "margin_from": params.margin_from if params else verdict_model.PROGRAMS_APART,
        "disagree_beyond": judged.beyond if margin is not None else None,
        "confidence": model.verdict_confidence,
        "host_bound": why,
        "host_paced": verdict_model.is_paced(key),
        "words": judged.words,
    }
    how = (
        f"the two one-sided tests at {(1 - model.verdict_confidence) / 2:.0%}: Student's t over each job's "
        "variance between blocks of consecutive calls; the margin, measured on medians of separate processes "
        "on separate cards, holds the spread between them"
    )
    return Judgement(
        "samples",
        medians.Side(samples=samples),
        medians.Side(samples=measured_by.samples),
        diff.point,
        diff.low,
        diff.high,
        how,
        judged.verdict,
        margin,
        measured_by,
        account,
    )


def job_class(run: BenchmarkRun, measured_by: RerunJob, *, samples: list, job_state: dict) -> tuple[str, str]:
    """(class key, why its figure includes the host's pace, or "") of new samples against the
    run's measurement (verdict_model.pair_class)."""
    measured = {
        "sampling": measured_by.sampling,
        "samples": measured_by.samples,
        "gpu_state": measured_by.gpu_state,
        "environment": measured_by.environment,
    }
    return verdict_model.pair_class(
        kernel=run.kernel.slug,
        provider=run.provider,
        mode=run.operation_mode,
        metric=run.metric,
        median_ms=run.median,
        jobs=[measured, {**job_state, "samples": samples}],
    )


def gpu_short_name(run: BenchmarkRun) -> str:
    """ "H200" for NVIDIA H200: the card's name as a visitor says it."""
    product = run.environment.product if run.environment_id else ""
    return product.removeprefix("NVIDIA ").strip() or "GPU"


def difference_interval(new: medians.Side, old: medians.Side, *, metric: str, spread_from=None):
    """medians.difference_interval for two figures of one metric, the one place that says how its
    samples are resampled: timed calls in batches of consecutive calls (medians.batch_medians), a
    memory benchmark's peaks, which are not a sequence of timed calls, one by one."""
    return medians.difference_interval(new, old, spread_from=spread_from, batched=metric == Metric.LATENCY)


def settle_reruns_left(verdicts: list[str]) -> int | None:
    """For a run's verdicts on other cards than the one that measured it: None unless there is one
    or more and every one is `inconclusive`; else how many more reruns a sweep sends to settle the
    run (none once it has had SETTLE_MAX). The sweep and the run's page both read this."""
    if not verdicts or set(verdicts) != {Verdict.INCONCLUSIVE}:
        return None
    return max(SETTLE_MAX - len(verdicts), 0)


def judgement_note(judged: Judgement, *, subject: str) -> str:
    if judged.model:
        return model_note(judged, subject=subject)
    compared = "KernelIndex-protocol samples" if judged.basis == "samples" else "upstream's do_bench figure"
    interval = (
        f"95% interval {judged.low:+.2%} to {judged.high:+.2%}" if judged.low is not None else "no interval"
    )
    why = {
        Verdict.AGREES: f"the whole interval lies within ±{judged.tolerance:.1%}",
        Verdict.DISAGREES: f"the whole interval lies outside ±{judged.tolerance:.1%}",
        Verdict.INCONCLUSIVE: f"the interval is not wholly inside or wholly outside ±{judged.tolerance:.1%}; "
        "another rerun may settle it",
    }[judged.verdict]
    return (
        f"Compared: {compared}. Difference of medians {_percent(judged.deviation)}, {interval} ({judged.how}). "
        f"{subject}: {judged.new.count}; recorded run: {judged.old.count}. {why[0].upper()}{why[1:]}."
    )


def model_note(judged: Judgement, *, subject: str) -> str:
    """A verdict of the model in a visitor's words: its verdict, class and margin and where the
    margin came from, then the difference and its interval."""
    account = judged.model
    words = account["words"]
    host = f" This figure includes the host's pace: {account['host_bound']}." if account["host_bound"] else ""
    margin = (
        ""  # no margin (too few pairs, or two compiled programs): the words say why
        if account.get("margin") is None
        else " (the margin: how far apart 95 in 100 pairs of cards put the same workload's median, "
        f"measured on {account['margin_from']})"
    )
    return (
        f"{words[0].upper()}{words[1:]}{margin}. Difference of medians "
        f"{_percent(judged.deviation)}, {account.get('confidence', intervals.CONFIDENCE):.0%} interval "
        f"{judged.low:+.2%} to {judged.high:+.2%} ({judged.how}). "
        f"{subject}: {judged.new.count}; recorded run: {judged.old.count}.{host}"
    )


def _percent(value) -> str:
    return "unknown" if value is None else f"{value:+.2%}"
