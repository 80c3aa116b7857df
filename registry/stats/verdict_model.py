"""The verdict model: which class a rerun belongs to, the between-process variance component of
each class, the equivalence margin of each class measured from the fleet's card-to-card spread,
and the checks that keep both honest (leave one kernel out, the shift test). No Django.

A class is metric × duration band × at the power cap or not; host-bound jobs (the GPU waits on
the host inside the timed pass) are a class of their own for each metric and never count in GPU
agreement. docs/protocol.md, "Verdicts by class", describes it with the figures of
scripts/controlled_figures.py --verdicts."""

import dataclasses
import functools
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from registry.stats import intervals

# Bands of a run's median in ms, largest first: (lower bound, name).
BANDS = ((10.0, "10 ms and over"), (1.0, "1–10 ms"), (0.1, "0.1–1 ms"), (0.0, "under 0.1 ms"))
HOST_BOUND = "host-bound"  # the class of jobs the host paces (PACED)
HOST_WAITS_CLASS = "waits on the host"  # the classes, by band, of jobs that wait on it once a call
# The classes, by band, of a rerun timed on another kind of host than its measurement (host_kind):
# the first H200 sweep ran on two-GPU hosts (32 CPU threads), a worker timing on each card at once,
# and the reruns of its runs on one-GPU hosts (16 threads) lie apart by over twice as much as
# pairs timed on one kind of host (docs/protocol.md, "Verdicts by class").
HOST_KINDS_CLASS = "timed on two kinds of host"
# The classes, by band, of a rerun that timed another compiled program than its measurement did
# (programs_differ: TorchDynamo compiled one of them for other, symbolic, sizes): not one thing
# timed twice, so no verdict on the card (docs/protocol.md, "Two compiled programs").
PROGRAMS_CLASS = "two compiled programs"
PROGRAMS_APART = "the two jobs timed different compiled programs, not one thing twice"
PROGRAMS_WORDS = (
    "inconclusive: the two jobs timed different compiled programs (TorchDynamo compiled one of them "
    "for symbolic input sizes, carried over from another problem in the same process), so their "
    "times say nothing of the cards"
)
# The classes judged apart from the GPU's agreement: the figure holds more than the GPU's work.
APART = (HOST_BOUND, HOST_WAITS_CLASS, HOST_KINDS_CLASS, PROGRAMS_CLASS)
PACED, WAITS = "paced", "waits"
MARGIN_QUANTILE = 0.95  # a margin: how far apart 95 in 100 pairs of cards put a workload's median
# A verdict is a test at the 5% level each way. `agrees` is the two one-sided tests (TOST) at 5%:
# the difference is below +margin and above −margin, each at 95% one-sided, which is the 90%
# two-sided interval lying within ±margin; the shift test checks exactly that error (a rerun 5%
# off, beyond every margin, agrees at most 5 times in 100). `disagrees` is its mirror, the
# difference beyond the margin at 95% one-sided, judged against the upper end of the margin's own
# 95% interval: the margin is the 95th percentile of a few hundred pairs, and a rerun is called out
# of line (the moderators told, the job `diverged`) only beyond what the fleet's figure could be.
VERDICT_CONFIDENCE = 0.90
MIN_PAIRS = 20  # a floor; a margin also needs a finite interval of its 95th percentile (about 60 pairs)
# Fewer same-card reruns than this and the component is fitted on the class's group (every band):
# a fit at the 95th percentile of |z| needs 2 / (1 − 0.95) = 40 reruns for two to lie beyond it.
MIN_SAME_CARD = 40
SHIFTS = (0.05, 0.10)
# The spin ahead of each sample is capped at 20 ms at 2 GHz (harness/timing.py LEAD_CAP_CYCLES);
# a spin at its cap may not have covered the host's time to queue a call.
LEAD_CAP_CYCLES = 40_000_000
# A job whose calls sit mostly on a slower level than its fastest: half its calls or more take over
# ERRATIC_FACTOR times its fastest calls' time (their 5th percentile). Its median is then set by
# whatever stalled those calls, not by the op's work on the GPU (a relu_squared rerun of
# 2026-12-03: 81% of its 4,400 calls at 20-40 times the rest, median 13 times the measurement's).
ERRATIC_FACTOR = 2.0
ERRATIC_FASTEST = 0.05
ERRATIC_MIN_SAMPLES = 20
POWER_LIMITS = {"sw_power_cap", "hw_power_brake_slowdown"}


@dataclass(frozen=True)
class HostWait:
    """Calls in an op's timed pass that make the GPU wait on the host, read from upstream's
    liger-kernel code (its benchmark script and the op it calls)."""

    passes: tuple[str, ...]
    calls: str
    # The host paces the pass (a Python loop queues its work, waiting on the GPU as it goes): the
    # figure is the host's. False: one wait a call, after which the GPU's work dominates.
    paces: bool = False


FORWARD, BACKWARD = ("forward", "full"), ("backward", "full")
GRAD_CHECK = "`torch.equal(grad_output, torch.tensor(1.0, device=...))` at the start of its backward, in `liger_kernel/ops/{}`"
CHUNKED_GRAD_CHECK = (
    "`torch.ne(grad_output, torch.tensor(1.0, device=...))` in the backward of `liger_kernel/chunked_loss/{}`"
)
# (kernel, provider) -> the waits in its timed passes. Passes are upstream's modes: "forward"
# times the forward, "full" forward and backward, "backward" the backward alone (the forward runs
# untimed). Any wait there lets the spin ahead of the call run out, so the host's time to queue
# the rest of the pass is in the figure.
HOST_WAITS = {
    ("fused_moe", "huggingface"): (
        HostWait(
            FORWARD,
            "`.nonzero()` on the expert mask, then `torch.where` for each expert hit, in the benchmark's "
            "`_huggingface_moe_forward`: the host reads the GPU's answer, then queues each expert's work "
            "in a Python loop",
            paces=True,
        ),
    ),
    ("fused_moe", "liger"): (
        HostWait(
            FORWARD,
            "`.item()` on `expert_tile_offset[-1]` (the tile count its buffers are sized by) in "
            "`liger_kernel/ops/fused_moe.py`",
        ),
    ),
    ("fused_neighborhood_attention", "torch"): (
        HostWait(
            FORWARD,
            "the Python loop of element writes `mask[i, j] = True` in the benchmark's "
            "`_create_neighborhood_mask`, one launch per element, on every forward",
            paces=True,
        ),
    ),
    ("multi_token_attention", "torch"): (
        HostWait(
            FORWARD,
            "`torch.tensor(-1e9, device=...)` and `torch.tensor(0.0, device=...)`, built from Python "
            "scalars in the benchmark's `TorchMultiTokenAttention.forward`",
            paces=True,
        ),
    ),
    ("sparse_multi_token_attention", "torch"): (
        HostWait(
            FORWARD,
            "`torch.tensor(-1e9, device=...)` and `torch.tensor(0.0, device=...)`, built from Python "
            "scalars in the benchmark's sparse multi-token attention forward",
            paces=True,
        ),
    ),
    ("cross_entropy", "liger"): (
        HostWait(FORWARD, "`target_mask.sum().item()` in `liger_kernel/ops/cross_entropy.py`'s forward"),
        HostWait(BACKWARD, GRAD_CHECK.format("cross_entropy.py")),
    ),
    ("fused_linear_cross_entropy", "liger"): (
        HostWait(FORWARD, "`target_mask.sum().item()` in `liger_kernel/ops/fused_linear_cross_entropy.py`"),
        HostWait(BACKWARD, GRAD_CHECK.format("fused_linear_cross_entropy.py")),
    ),
    ("jsd", "liger"): (HostWait(BACKWARD, GRAD_CHECK.format("jsd.py")),),
    ("kl_div", "liger"): (HostWait(BACKWARD, GRAD_CHECK.format("kl_div.py")),),
    ("tvd", "liger"): (HostWait(BACKWARD, GRAD_CHECK.format("tvd.py")),),
    ("fused_linear_jsd", "liger"): (
        HostWait(
            BACKWARD,
            "`torch.ne(grad_output, torch.tensor(1.0, device=...))` in `liger_kernel/ops/fused_linear_jsd.py`",
        ),
    ),
    ("distill_jsd_loss", "liger"): (
        HostWait(BACKWARD, CHUNKED_GRAD_CHECK.format("fused_linear_distillation.py")),
    ),
    ("distill_cosine_loss", "liger"): (
        HostWait(BACKWARD, CHUNKED_GRAD_CHECK.format("fused_linear_distillation.py")),
    ),
    ("fused_linear_cpo_loss", "liger"): (
        HostWait(BACKWARD, CHUNKED_GRAD_CHECK.format("fused_linear_preference.py")),
    ),
    ("fused_linear_orpo_loss", "liger"): (
        HostWait(BACKWARD, CHUNKED_GRAD_CHECK.format("fused_linear_preference.py")),
    ),
}


def band(median_ms: float) -> str:
    return next(name for low, name in BANDS if median_ms >= low)


def host_bound_reason(
    *, kernel: str, provider: str, mode: str, sampling: dict, sample_count: int, samples=None
) -> str:
    """Why a job's time includes the host's pace, or "" when it is GPU-timed (host_bound)."""
    return host_bound(
        kernel=kernel,
        provider=provider,
        mode=mode,
        sampling=sampling,
        sample_count=sample_count,
        samples=samples,
    )[1]


def host_bound(
    *, kernel: str, provider: str, mode: str, sampling: dict, sample_count: int, samples=None
) -> tuple[str, str]:
    """(kind, why) of a job whose time includes the host's pace; ("", "") when it is GPU-timed.
    PACED: the host sets the pace (half its calls or more host-paced, the harness's reading; or
    a wait named in HOST_WAITS that paces the pass; or, read from its `samples` where given, half
    its calls or more stalled, erratic_calls): the figure is not the GPU's. WAITS: a wait named
    in HOST_WAITS once a call, or, for a job recorded before the pace was read, its spin at the
    cap: the figure holds the host's round trip beside the GPU's work."""
    named = [wait for wait in HOST_WAITS.get((kernel, provider), ()) if mode in wait.passes]
    paced = sampling.get("host_paced_samples")
    if isinstance(paced, int) and sample_count and paced * 2 >= sample_count:
        why = f"{paced} of its {sample_count} calls took the host longer to queue than the GPU took to run"
        if named:
            why = "its timed pass waits on the host: " + "; ".join(w.calls for w in named) + "; " + why
        return PACED, why
    stalled = erratic_calls(samples)
    if stalled and stalled * 2 >= len(samples):
        return PACED, (
            f"{stalled} of its {len(samples)} calls took over {ERRATIC_FACTOR:g} times as long as its "
            "fastest: something other than the op's work on the GPU set their pace"
        )
    if named:
        return (PACED if any(w.paces for w in named) else WAITS), (
            "its timed pass waits on the host: " + "; ".join(w.calls for w in named)
        )
    if not isinstance(paced, int) and (sampling.get("lead_cycles") or 0) >= LEAD_CAP_CYCLES:
        return WAITS, "the spin ahead of its calls reached its cap, so the host may have kept the GPU waiting"
    return "", ""


def erratic_calls(samples) -> int:
    """How many of a job's timed calls took over ERRATIC_FACTOR times its fastest calls' time (the
    ERRATIC_FASTEST quantile); 0 for fewer than ERRATIC_MIN_SAMPLES samples or none given."""
    values = np.asarray(
        [v for v in samples or () if isinstance(v, int | float) and math.isfinite(v)], dtype=float
    )
    if len(values) < ERRATIC_MIN_SAMPLES:
        return 0
    fastest = float(np.quantile(values, ERRATIC_FASTEST))
    return int(np.count_nonzero(values > ERRATIC_FACTOR * fastest)) if fastest > 0 else 0


def pair_host_bound(sides: list[tuple[str, str]]) -> tuple[str, str]:
    """The (kind, why) of a measurement and its rerun together: paced if either side is, else
    waits if either side waits."""
    for kind in (PACED, WAITS):
        for side_kind, why in sides:
            if side_kind == kind:
                return kind, why
    return "", ""


def power_capped(gpu_state: dict) -> bool:
    """At the power cap. Since NVML is sampled through the timing (gpu_state["blocks"], each with
    the share of its readings that named each reason): a power limit in half the readings of a
    block or more. Before that: the reading taken after the timing names a power limit (the
    reading before belongs to the previous job)."""
    state = gpu_state if isinstance(gpu_state, dict) else {}
    blocks = state.get("blocks")
    if isinstance(blocks, list):
        for block in blocks:
            reasons = block.get("reasons") if isinstance(block, dict) else None
            if isinstance(reasons, dict) and any(
                isinstance(reasons.get(limit), int | float) and reasons[limit] >= 0.5
                for limit in POWER_LIMITS
            ):
                return True
        return False
    after = state.get("after") or {}
    return bool(POWER_LIMITS & set(after.get("reasons") or []))


def host_kind(environment: dict | None) -> str:
    """The kind of host a job was timed on, from its recorded environment: its CPU and how many
    threads it has ("Intel(R) Xeon(R) Processor, 16 threads"); "" where either is not recorded."""
    env = environment if isinstance(environment, dict) else {}
    cpu, threads = env.get("cpu"), env.get("cpu_threads")
    return f"{cpu}, {threads} threads" if cpu and threads else ""


def hosts_differ(environments) -> bool:
    """Whether jobs were timed on different kinds of host: every kind known, and not all one."""
    kinds = [host_kind(env) for env in environments]
    return all(kinds) and len(set(kinds)) > 1


def programs_differ(samplings) -> bool:
    """Whether two jobs timed different compiled programs: each records the sizes its compile was
    for (`sampling.program`, KernelBench's compiled jobs), and they are not the same."""
    programs = [
        json.dumps(s["program"].get("sizes"), sort_keys=True, default=str)
        for s in samplings
        if isinstance(s, dict) and isinstance(s.get("program"), dict)
    ]
    return len(programs) > 1 and len(set(programs)) > 1


def class_key(
    *,
    metric: str,
    median_ms: float,
    capped: bool,
    host_bound: str | bool,
    hosts_differ: bool = False,
    programs_differ: bool = False,
) -> str:
    """`host_bound`: the kind host_bound() gives ("" GPU-timed; True is taken as PACED);
    `hosts_differ`: the two jobs ran on different kinds of host (hosts_differ());
    `programs_differ`: they timed different compiled programs (programs_differ())."""
    if host_bound is True or host_bound == PACED:
        return f"{metric}|{HOST_BOUND}"
    if programs_differ:
        return f"{metric}|{PROGRAMS_CLASS}|{band(median_ms)}"
    if host_bound == WAITS:
        return f"{metric}|{HOST_WAITS_CLASS}|{band(median_ms)}"
    if hosts_differ:
        return f"{metric}|{HOST_KINDS_CLASS}|{band(median_ms)}"
    return f"{metric}|{band(median_ms)}|{'at the power cap' if capped else 'below the power cap'}"


def pair_class(
    *, kernel: str, provider: str, mode: str, metric: str, median_ms: float, jobs, capped=power_capped
) -> tuple[str, str]:
    """(class key, why its figure includes the host's pace, or "") of a measurement and its rerun,
    or of a measurement alone: paced by the host if either job is, else waiting on it if either
    does; at the power cap if either job was (`capped` reads a job's GPU state); else timed on two
    kinds of host if their environments say so; but two compiled programs before all but the
    host's pace (programs_differ). Each job is a mapping of its `sampling`,
    `samples`, `gpu_state` and `environment` (any may be missing), as the registry stores a job
    and the shipped files hold one. The one place a pair's class is decided: the registry's
    judgement, the shipped reruns' figures and KernelBench's sweep files all ask it."""
    jobs = list(jobs)
    kind, why = pair_host_bound(
        [
            host_bound(
                kernel=kernel,
                provider=provider,
                mode=mode,
                sampling=job.get("sampling") or {},
                sample_count=len(job.get("samples") or ()),
                samples=job.get("samples"),
            )
            for job in jobs
        ]
    )
    key = class_key(
        metric=metric,
        median_ms=median_ms,
        capped=any(capped(job.get("gpu_state") or {}) for job in jobs),
        host_bound=kind,
        hosts_differ=hosts_differ(job.get("environment") for job in jobs),
        programs_differ=programs_differ(job.get("sampling") for job in jobs),
    )
    return key, why


def is_gpu_timed(key: str) -> bool:
    """A class of GPU-timed ops: the ones GPU agreement counts."""
    return _second(key) not in APART


def is_paced(key: str) -> bool:
    """The class of ops the host paces: its reruns never make a run `reproduced`."""
    return _second(key) == HOST_BOUND


def _second(key: str) -> str:
    parts = key.split("|")
    return parts[1] if len(parts) > 1 else ""


def class_words(key: str) -> str:
    """A class in a visitor's words: "1–10 ms ops below the power cap"."""
    parts = key.split("|")
    if parts[1] == HOST_BOUND:
        return "ops whose timed pass the host paces"
    if parts[1] == HOST_WAITS_CLASS:
        return f"{parts[2]} ops whose timed pass waits on the host"
    if parts[1] == HOST_KINDS_CLASS:
        return f"{parts[2]} ops timed on two kinds of host"
    if parts[1] == PROGRAMS_CLASS:
        return f"{parts[2]} ops compiled into two different programs"
    return f"{parts[1]} ops {parts[2]}"


@dataclass(frozen=True)
class Pair:
    """One rerun against its run's measurement: the data every fit and check reads."""

    kernel: str
    workload: str  # the target (kernel, workload, provider, pass), for the pooled reference
    key: str  # class_key
    same_card: bool
    new: intervals.MedianEstimate
    old: intervals.MedianEstimate
    cards: tuple[str, str]  # measuring card, rerun's card

    @property
    def log_ratio(self) -> float:
        return self.new.log_median - self.old.log_median


@dataclass
class ClassParameters:
    process_sd: float  # between-process component, one SD of a log median
    process_df: float
    process_from: str  # which same-card reruns it was fitted on
    margin: float  # relative
    margin_from: str  # words: which cross-card pairs it was measured on
    margin_pairs: int
    margin_interval: tuple[float, float] = (math.nan, math.nan)

    @property
    def disagree_beyond(self) -> float:
        """How far a difference must lie, all of its interval, to disagree: the upper end of the
        margin's distribution-free 95% interval (the margin itself where that end is unknown)."""
        high = self.margin_interval[1]
        return max(high, self.margin) if math.isfinite(high) else self.margin


@dataclass
class Model:
    gpu: str
    confidence: float  # of the measurement's interval for a rerun's median (rerun_interval)
    classes: dict[str, ClassParameters] = field(default_factory=dict)
    verdict_confidence: float = VERDICT_CONFIDENCE  # of the difference's interval a verdict reads
    gpu_name: str = "GPU"  # the card as a visitor says it, in a verdict's words ("H200")

    def to_json(self) -> dict:
        return {
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "confidence": self.confidence,
            "verdict_confidence": self.verdict_confidence,
            "margin_quantile": MARGIN_QUANTILE,
            "classes": {key: _rounded(asdict(value)) for key, value in sorted(self.classes.items())},
        }

    @classmethod
    def from_json(cls, document: dict) -> "Model":
        classes = {}
        for key, value in document["classes"].items():
            value = {name: (math.nan if figure is None else figure) for name, figure in value.items()}
            value["process_df"] = math.inf if math.isnan(value["process_df"]) else value["process_df"]
            value["margin_interval"] = tuple(math.nan if v is None else v for v in value["margin_interval"])
            classes[key] = ClassParameters(**value)
        return cls(
            gpu=document["gpu"],
            confidence=document["confidence"],
            classes=classes,
            verdict_confidence=document.get("verdict_confidence", document["confidence"]),
            gpu_name=document.get("gpu_name", "GPU"),
        )

    def parameters(self, key: str) -> ClassParameters | None:
        return self.classes.get(key)


@dataclass(frozen=True)
class Judged:
    verdict: str
    difference: intervals.Difference
    key: str
    margin: float
    words: str  # "agrees: within the ±3.1% that two H200 cards differ on 1–10 ms ops below the power cap"
    beyond: float  # how far the whole interval must lie to disagree (ClassParameters.disagree_beyond)


def judge(
    model: Model,
    key: str,
    new: intervals.MedianEstimate,
    old: intervals.MedianEstimate,
    *,
    gpu_name: str = "H200",
) -> Judged | None:
    """The verdict on a rerun of class `key`: the interval of the difference of the two medians
    (at the model's verdict confidence: VERDICT_CONFIDENCE) against the class's margin, and for
    `disagrees` against the upper end of the margin's interval; None for a class the model lacks.

    The margin is measured on medians of separate processes on separate cards, so it already
    holds the spread between processes and between cards; the interval therefore carries what
    the margin cannot know, each job's own between-block variance (Student's t, Satterthwaite's
    df), and not the between-process component a second time. That component belongs to the
    measurement's interval for a rerun (rerun_interval), whose coverage same-card reruns check."""
    if _second(key) == PROGRAMS_CLASS:  # not one thing timed twice: nothing of the card to judge
        diff = intervals.difference(new, old, confidence=model.verdict_confidence)
        return Judged("inconclusive", diff, key, math.nan, PROGRAMS_WORDS, math.nan)
    params = model.parameters(key)
    if params is None:
        return None
    diff = intervals.difference(new, old, confidence=model.verdict_confidence)
    if not math.isfinite(params.margin):  # too few pairs of cards for a margin: nothing to judge by
        words = (
            f"inconclusive: no margin for {class_words(key)} on {gpu_name} cards yet: {params.margin_from}"
        )
        return Judged("inconclusive", diff, key, params.margin, words, params.disagree_beyond)
    verdict = class_verdict(params, diff.low, diff.high)
    words = verdict_words(verdict, key, params.margin, params.disagree_beyond, gpu_name)
    return Judged(verdict, diff, key, params.margin, words, params.disagree_beyond)


def class_verdict(params: ClassParameters, low: float, high: float) -> str:
    """The equivalence rule (medians.verdict) with a class's margin and its disagreement bound."""
    return intervals.equivalence_verdict(low, high, params.margin, params.disagree_beyond)


def verdict_words(verdict: str, key: str, margin: float, beyond: float, gpu_name: str = "H200") -> str:
    where = f"the ±{margin:.1%} that two {gpu_name} cards differ on {class_words(key)}"
    top = f"±{beyond:.1%}, the top of that margin's 95% interval"
    return {
        "agrees": f"agrees: within {where}",
        "disagrees": f"disagrees: beyond {where}, and beyond {top}",
        "inconclusive": f"inconclusive: neither wholly within {where} nor wholly beyond {top}",
    }[verdict]


def fit(
    pairs: list[Pair], *, gpu: str, gpu_name: str = "GPU", confidence: float = intervals.CONFIDENCE
) -> Model:
    """Fit every class seen in `pairs`: its between-process component from same-card reruns, then
    its margin from cross-card pairs. `gpu_name`: the card in a visitor's words ("H200")."""
    model = Model(gpu=gpu, confidence=confidence, gpu_name=gpu_name)
    for key in sorted({pair.key for pair in pairs if _second(pair.key) != PROGRAMS_CLASS}):
        sd, df, source = fit_process_component(pairs, key)
        margin, count, low, high, margin_from = fit_margin(pairs, key)
        model.classes[key] = ClassParameters(sd, df, source, margin, margin_from, count, (low, high))
    return model


def fit_process_component(
    pairs: list[Pair], key: str, *, share: float = intervals.CONFIDENCE
) -> tuple[float, float, str]:
    """The between-process component of a class (one SD of a log median), from same-card reruns:
    the least σ for which `share` of their log ratios, each divided by its own standard error
    sqrt(within-job variances + 2σ²), lie within the normal's central `share` (|z| ≤ 1.96 for
    95%): fitted at the confidence the intervals claim, since same-card differences have heavier
    tails than a normal, and a fit at the median |z| leaves a 95% interval covering about 81%.
    Each pair keeps its own within-job variance (jobs differ in it by orders of magnitude). A class with too
    few same-card reruns borrows from the nearest group that has enough (_component_scopes)."""
    for scope, match in _component_scopes(key):
        same = [p for p in pairs if p.same_card and match(p.key)]
        if len(same) >= MIN_SAME_CARD:
            ratios = np.abs([p.log_ratio for p in same])
            within = np.array([p.new.variance + p.old.variance for p in same])
            sd = _component_for_z(ratios, within, share=share)
            return sd, float(len(same) - 1), f"{len(same)} same-card reruns of {scope}"
    return 0.0, math.inf, "no same-card reruns"


def _component_for_z(ratios: np.ndarray, within: np.ndarray, *, share: float) -> float:
    from scipy import optimize, stats  # here, not with the module (registry/stats/medians.py says why)

    target = stats.norm.ppf((1 + share) / 2)

    def excess(sd: float) -> float:
        # A pair with no difference and no variance (three blocks of equal medians) sits at z = 0;
        # one with a difference and no variance, beyond every bound until σ > 0.
        scale = np.sqrt(within + 2 * sd**2)
        z = np.divide(ratios, scale, out=np.where(ratios > 0, np.inf, 0.0), where=scale > 0)
        return float(np.quantile(z, share)) - target

    if excess(0.0) <= 0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, 10.0))


def fit_margin(pairs: list[Pair], key: str) -> tuple[float, int, float, float, str]:
    """The margin of a class: the MARGIN_QUANTILE of |difference| between two cards' medians of
    the same workload (cross-card pairs of the class), with its distribution-free 95% interval.
    A class whose pairs are too few for that interval to be finite (about 60) has its margin
    measured on the nearest group whose pairs are enough (_component_scopes: its band at and
    below the cap, then its side of 1 ms, then every GPU-timed op)."""
    by_key: dict[str, list[float]] = {}  # each class's cross-card differences: a scope asks per class
    for p in pairs:
        if not p.same_card:
            by_key.setdefault(p.key, []).append(abs(math.expm1(p.log_ratio)))
    own = None  # the class's own pairs, named where no scope has enough
    for scope, match in _component_scopes(key):
        cross = sorted(value for other, values in by_key.items() if match(other) for value in values)
        own = own or f"{len(cross)} pairs of cards on {scope}, too few for a margin"
        if len(cross) >= MIN_PAIRS:
            margin, low, high = _margin_interval(tuple(cross))
            if math.isfinite(low) and math.isfinite(high):
                return margin, len(cross), low, high, f"{len(cross)} pairs of cards on {scope}"
    return math.nan, 0, math.nan, math.nan, own if own and not own.startswith("0 ") else "no pairs of cards"


@functools.lru_cache(maxsize=1024)
def _margin_interval(differences: tuple) -> tuple[float, float, float]:
    """The margin quantile of these differences (sorted) and its interval: a fit asks it again for
    each class that widens to the same scope, and a leave-one-kernel-out check for every fold."""
    return intervals.quantile_interval(differences, q=MARGIN_QUANTILE)


LONG_BANDS = {name for low, name in BANDS if low >= 1.0}


def _component_scopes(key: str):
    """Where a class's between-process component and margin are fitted: the class; else its band
    at and below the cap; else every band on its side of 1 ms (process-to-process spread follows
    how long an op runs: under 1 ms it is several times larger); else every GPU-timed class of its
    metric. A banded class judged apart (ops that wait on the host, reruns timed on another kind of
    host) widens within its own kind first (its side of 1 ms, then every band), then takes the
    GPU-timed scopes of its band."""
    metric, rest = key.split("|", 1)
    yield class_words(key), lambda other: other == key
    if rest == HOST_BOUND:
        yield (
            "ops whose figure includes the host's pace",
            lambda other: _second(other) in (HOST_BOUND, HOST_WAITS_CLASS),
        )
        return
    kind = rest.split("|")[0] if rest.split("|")[0] in APART else ""
    band_name = rest.split("|")[-1] if kind else rest.split("|")[0]
    long_op = band_name in LONG_BANDS

    def parts(other: str) -> list[str]:
        return other.split("|")

    def side(other: str) -> bool:
        return (parts(other)[-1 if parts(other)[1] in APART else 1] in LONG_BANDS) == long_op

    if kind:
        what = {
            HOST_WAITS_CLASS: "whose timed pass waits on the host",
            HOST_KINDS_CLASS: "timed on two kinds of host",
        }[kind]
        yield (
            f"ops {'of 1 ms and over' if long_op else 'under 1 ms'} {what}",
            lambda other: parts(other)[0] == metric and parts(other)[1] == kind and side(other),
        )
        yield (
            f"every op {what}",
            lambda other: parts(other)[0] == metric and parts(other)[1] == kind,
        )
    yield (
        f"{band_name} ops at and below the power cap",
        lambda other: other.startswith(f"{metric}|{band_name}|"),
    )
    yield (
        "ops of 1 ms and over" if long_op else "ops under 1 ms",
        lambda other: parts(other)[0] == metric and is_gpu_timed(other) and side(other),
    )
    yield "every GPU-timed op", lambda other: parts(other)[0] == metric and is_gpu_timed(other)


def verdicts(model: Model, pairs: list[Pair], *, shift: float = 0.0) -> list[str]:
    """The verdict on each pair under `model`, the rerun's samples scaled by (1 + shift)."""
    out = []
    for pair in pairs:
        new = pair.new
        if shift:
            new = dataclasses.replace(new, log_median=new.log_median + math.log1p(shift))
        judged = judge(model, pair.key, new, pair.old)
        out.append(judged.verdict if judged else "unjudged")
    return out


def leave_one_kernel_out(pairs: list[Pair], *, gpu: str, select) -> list[str]:
    """Each kernel's selected pairs judged under a model fitted on every other kernel's pairs."""
    out = []
    for kernel in sorted({p.kernel for p in pairs}):
        model = fit([p for p in pairs if p.kernel != kernel], gpu=gpu)
        out.extend(verdicts(model, [p for p in pairs if p.kernel == kernel and select(p)]))
    return out


def coverage(model: Model, pairs: list[Pair]) -> float:
    """Of same-card reruns, the share whose median lies inside the measurement's 95% interval for
    a rerun's median (rerun_interval)."""
    inside = []
    for pair in pairs:
        low, high = rerun_interval(model, pair.key, pair.old)
        inside.append(low <= pair.new.median <= high)
    return float(np.mean(inside)) if inside else math.nan


def leave_one_kernel_out_coverage(pairs: list[Pair], *, gpu: str, select) -> float:
    """coverage() with each kernel's selected same-card reruns judged by a model fitted on every
    other kernel's pairs: the component is not checked on the reruns it was fitted on."""
    inside, count = 0.0, 0
    for kernel in sorted({p.kernel for p in pairs}):
        mine = [p for p in pairs if p.kernel == kernel and p.same_card and select(p)]
        if mine:
            model = fit([p for p in pairs if p.kernel != kernel], gpu=gpu)
            mine = [p for p in mine if model.parameters(p.key) is not None]
            inside += coverage(model, mine) * len(mine) if mine else 0.0
            count += len(mine)
    return inside / count if count else math.nan


def without_process_component(model: Model) -> Model:
    """The same model with every class's between-process component at zero: the within-job
    interval alone, for comparison."""
    classes = {key: ClassParameters(**{**asdict(p), "process_sd": 0.0}) for key, p in model.classes.items()}
    return dataclasses.replace(model, classes=classes)


def rerun_interval(model: Model, key: str, old: intervals.MedianEstimate) -> tuple[float, float]:
    """Where another process's median of the same work falls, 95 times in 100: the job's
    between-block variance twice (its own, and a rerun's of the same length), and, for a job
    whose blocks are stretches of one process, the class's between-process component once for
    each process. A job sampled in independent blocks carries that spread in its blocks (fresh
    same-card reruns on an H100, 2026-12-06: 93.4% of 181 inside from the blocks alone, 99.4%
    with the component added; docs/reports/2026-12-06-h100-blocks.md)."""
    params = model.parameters(key)
    doubled = dataclasses.replace(old, variance=2 * old.variance)
    return intervals.median_interval(
        doubled,
        process_variance=0.0 if old.independent else 2 * params.process_sd**2,
        process_df=params.process_df,
        confidence=model.confidence,
    )


def card_offsets(medians: list[tuple[str, str, float]]) -> dict[str, list[float]]:
    """For (card, workload, log median) rows: each card's log offsets from the median of the other
    cards' medians of each workload it measured that another card measured too."""
    by_workload = defaultdict(dict)
    for card, workload, value in medians:
        by_workload[workload].setdefault(card, []).append(value)
    offsets = defaultdict(list)
    for cards in by_workload.values():
        per_card = {card: float(np.median(values)) for card, values in cards.items()}
        for card, value in per_card.items():
            others = [v for c, v in per_card.items() if c != card]
            if others:
                offsets[card].append(value - float(np.median(others)))
    return dict(offsets)


def _rounded(value):
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    if isinstance(value, tuple | list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value
