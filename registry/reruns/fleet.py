"""KernelIndex's fleet of physical cards (by UUID prefix): each card's jobs and its offset from
the fleet per verdict class, read from the stored medians of controlled latency jobs in two
queries whatever the fleet's size. Offsets are shown, never applied to a figure or a verdict.

A card's offset in a class: for each workload of that class that it and another card measured,
the log ratio of its median to the median of the other cards' medians; the offset is the median
of those, with its distribution-free 95% interval (scipy's quantile_test, order statistics) and
the number of workloads it rests on."""

import math
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Q

from registry.models import Metric
from registry.reruns.judgement import MODEL_FAMILY
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.stats import intervals, verdict_model

PREFIX_LENGTH = 12  # "GPU-" and the first eight hex digits


@dataclass
class ClassOffset:
    key: str
    words: str
    offset: float
    low: float | None
    high: float | None
    workloads: int


@dataclass
class Card:
    prefix: str
    gpu: str
    measure_jobs: int = 0
    rerun_jobs: int = 0
    offsets: list[ClassOffset] = field(default_factory=list)
    jobs: list[dict] = field(default_factory=list)

    @property
    def job_count(self) -> int:
        return self.measure_jobs + self.rerun_jobs


def fleet(*, with_jobs: bool = False) -> dict[str, Card]:
    """Every card that ran a finished controlled latency job of KernelIndex's CUDA protocol, with
    its offsets per class. A workload's class is the verdict model's class of its reruns (stored
    with each verdict); a workload no rerun judged has one card and no offset."""
    rows = _job_rows()
    classes = {}
    for row in rows:
        account = (row["sampling"] or {}).get("verdict_model") if isinstance(row["sampling"], dict) else None
        if isinstance(account, dict) and isinstance(account.get("verdict_class"), str):
            classes.setdefault(row["target"], account["verdict_class"])
    cards: dict[str, Card] = {}
    medians = defaultdict(list)  # class -> (card, workload, log median)
    for row in rows:
        prefix = row["gpu_uuid"][:PREFIX_LENGTH]
        card = cards.setdefault(prefix, Card(prefix=prefix, gpu=row["gpu_slug"]))
        if row["kind"] == JobKind.MEASURE:
            card.measure_jobs += 1
        else:
            card.rerun_jobs += 1
        if with_jobs:
            card.jobs.append(row)
        if row["median"] and row["median"] > 0 and row["target"] in classes:
            medians[classes[row["target"]]].append((prefix, row["target"], math.log(row["median"])))
    for key, values in sorted(medians.items()):
        for prefix, offsets in sorted(verdict_model.card_offsets(values).items()):
            point, low, high = intervals.quantile_interval(offsets, q=0.5)
            cards[prefix].offsets.append(
                ClassOffset(
                    key,
                    verdict_model.class_words(key),
                    math.expm1(point),
                    math.expm1(low) if math.isfinite(low) else None,
                    math.expm1(high) if math.isfinite(high) else None,
                    len(offsets),
                )
            )
    return dict(sorted(cards.items()))


def _job_rows() -> list[dict]:
    """The finished latency jobs of controlled cuda-v1 runs with a card: one query. `target` is
    the run a job measured or reran."""
    jobs = (
        RerunJob.objects.filter(
            metric=Metric.LATENCY,
            state__in=(JobState.SUCCEEDED, JobState.DIVERGED),
            kind__in=(JobKind.MEASURE, JobKind.RERUN),
        )
        .exclude(gpu_uuid="")
        .filter(
            Q(kind=JobKind.MEASURE, result_run__protocol__comparability_family=MODEL_FAMILY)
            | Q(kind=JobKind.RERUN, run__protocol__comparability_family=MODEL_FAMILY)
        )
        .values(
            "pk",
            "kind",
            "gpu_uuid",
            "gpu_slug",
            "median",
            "sampling",
            "provider",
            "operation_mode",
            "run_id",
            "result_run_id",
            "run__median",
            "result_run__median",
            "kernel__slug",
            "finished_at",
        )
        .order_by("pk")
    )
    rows = []
    for job in jobs:
        target = job["result_run_id"] if job["kind"] == JobKind.MEASURE else job["run_id"]
        if target is None:
            continue
        sampling = job["sampling"] if isinstance(job["sampling"], dict) else {}
        rows.append(
            {
                **job,
                "target": target,
                "kernel": job["kernel__slug"] or "",
                "sampling": sampling,
                "run_median": job["result_run__median"]
                if job["kind"] == JobKind.MEASURE
                else job["run__median"],
            }
        )
    return rows
