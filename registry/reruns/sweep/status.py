"""Where a sweep stands (`manage.py controlled_sweep --status`), read from the registry alone: no
GPU, no worker."""

from pathlib import Path

from registry.models import EvidenceLevel
from registry.reruns import controlled
from registry.reruns.judgement import settle_reruns_left
from registry.reruns.sweep.targets import (
    RerunRecord,
    legacy_runs,
    measured_targets,
    never_rerun,
    same_card_runs,
    targets,
    unsettled,
)
from registry.reruns.sweep.timeouts import timed_out_targets, timeouts_read
from registry.reruns.sweep.workers import JOB_TIMEOUT_S


def progress(
    *,
    gpu_slug: str,
    kernels: list[str] | None = None,
    out: Path = controlled.BUNDLED_CONTROLLED_DIR,
    job_timeout_s: float = JOB_TIMEOUT_S,
) -> dict:
    """Where the sweep stands for `gpu_slug`: its targets, those measured, the reruns it still
    owes (runs never rerun, such as those a one-card host left for another card; runs rerun so
    far only on the card that measured them; older-protocol runs without a verdict) and the jobs
    left, a measure job and its rerun for each target still to measure; targets a sweep would not
    try under `job_timeout_s`, since a job of theirs ran past it or out of memory (`out`'s
    timeouts file), are counted apart. Then how the measured targets stand: `reproduced`, and
    those left `inconclusive` after the most reruns a sweep sends to settle them (SETTLE_MAX).
    Per kernel too, in the order `targets` gives."""
    todo = targets(gpu_slug=gpu_slug, kernels=kernels)
    wanted = set(todo)
    by_target = {
        target: run for target, run in measured_targets(gpu_slug=gpu_slug).items() if target in wanted
    }
    measured = list(by_target.values())
    never = never_rerun(measured)
    record = RerunRecord.read(measured)
    own_card_only = same_card_runs(measured, record, elsewhere_than=set())
    to_settle = unsettled(measured, record, elsewhere_than=set())
    # Runs with as many inconclusive verdicts on other cards as a sweep sends: no sweep reruns them.
    left_inconclusive = [
        run
        for run in measured
        if run.pk in record.measured_on and settle_reruns_left(record.elsewhere(run.pk)) == 0
    ]
    legacy = legacy_runs(gpu_slug, kernels)
    unmeasured = [target for target in todo if target not in by_target]
    skipped = timed_out_targets(unmeasured, timeouts_read(out, gpu_slug), job_timeout_s=job_timeout_s)
    to_measure = len(unmeasured) - len(skipped)
    owed = len(never) + len(own_card_only) + len(legacy) + len(to_settle)
    return {
        "gpu": gpu_slug,
        "targets": len(todo),
        "measured": len(measured),
        "to_measure": to_measure,
        "not_tried_after_a_timeout_or_out_of_memory": len(skipped),
        "reruns_owed": {
            "never_rerun": len(never),
            "rerun_only_on_the_measuring_card": len(own_card_only),
            "older_protocol_without_verdict": len(legacy),
            "inconclusive_on_another_card": len(to_settle),
        },
        "jobs_left": 2 * to_measure + owed,
        "reproduced": sum(run.evidence_level == EvidenceLevel.REPRODUCED for run in measured),
        "inconclusive_after_the_most_reruns": len(left_inconclusive),
        "kernels": _per_kernel(todo, measured),
    }


def _per_kernel(todo, measured) -> dict:
    """Each kernel's targets and those measured, in the order of `todo`."""
    per_kernel = {}
    for target in todo:
        per_kernel.setdefault(target.kernel, {"targets": 0, "measured": 0})["targets"] += 1
    for run in measured:
        per_kernel[run.kernel.slug]["measured"] += 1
    return per_kernel
