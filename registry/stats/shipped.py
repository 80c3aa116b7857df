"""Reruns of the shipped controlled runs (registry/data/controlled-runs/*.json.gz, the
`kernelindex-controlled-runs/v1` export) as verdict_model.Pair rows: what the model is fitted on
and checked against. Reads the files with the standard library; no Django."""

import functools
import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path

from registry.stats import intervals, verdict_model

LATENCY_FAMILY = "kernelindex/cuda-v1"


@dataclass(frozen=True)
class Rerun:
    """A judged latency rerun of a current kernelindex/cuda-v1 run, and what the figures read."""

    pair: verdict_model.Pair
    run: str  # the run's external id
    started_at: str
    old_verdict: str
    host_bound: str  # why, or ""
    hosts: tuple[str, str] = ("", "")  # the kinds of host of the measurement and the rerun (host_kind)
    samples: tuple[int, int] = (0, 0)  # how many samples the measurement and the rerun hold


def entries(folder: Path):
    """Every run entry of the folder's files, in file order. The figures read the same files
    several times in one process (controlled_figures, blocks_report, the tests of both): each
    file is decoded once while it stays as it was (its size and modification time); readers
    only read what is yielded."""
    for path in sorted(Path(folder).glob("*.json.gz")):
        stat = path.stat()
        yield from _runs_of(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _runs_of(path: str, mtime_ns: int, size: int) -> list:
    return json.loads(gzip.decompress(Path(path).read_bytes()))["runs"]


def estimate(job: dict) -> intervals.MedianEstimate:
    """The job's median estimate (intervals.median_estimate of its samples, by its recorded blocks
    where it has them), the same job read again not estimated again."""
    block_ids = _block_ids(job)
    key = (tuple(job["samples"]), tuple(block_ids) if isinstance(block_ids, list | tuple) else None)
    try:
        return _estimate(*key)
    except TypeError:  # a sample or block id that is no number: estimated as it is, and refused there
        return intervals.median_estimate(job["samples"], block_ids=block_ids)


@functools.lru_cache(maxsize=65536)
def _estimate(samples: tuple, block_ids: tuple | None) -> intervals.MedianEstimate:
    return intervals.median_estimate(samples, block_ids=block_ids)


def job_class(
    entry: dict, measure: dict, rerun: dict | None, *, capped=verdict_model.power_capped
) -> tuple[str, str]:
    """(class key, why host-bound or "") of a rerun against its measurement (rerun None: the
    measurement's own class), verdict_model.pair_class of the entry's run. `capped` reads a job's
    GPU state (another reading of the cap, for comparison: controlled_figures)."""
    run = entry["run"]
    return verdict_model.pair_class(
        kernel=entry["kernel"]["slug"],
        provider=entry["implementation"]["provider"],
        mode=run["operation_mode"],
        metric=run["metric"],
        median_ms=run["median"],
        jobs=[measure] + ([rerun] if rerun else []),
        capped=capped,
    )


def reruns(folder: Path, *, capped=verdict_model.power_capped) -> list[Rerun]:
    """Every judged rerun with four samples or more of a current cuda-v1 latency run that has its
    measure job (runs of older protocols are judged under their own); `capped` as in job_class."""
    out = []
    for entry in entries(folder):
        run = entry["run"]
        if entry["protocol"]["comparability_family"] != LATENCY_FAMILY or run["metric"] != "latency":
            continue
        measure = next((job for job in entry["jobs"] if job["kind"] == "measure"), None)
        if measure is None or len(measure["samples"]) < 4:
            continue
        old = estimate(measure)
        target = (
            entry["kernel"]["slug"],
            entry["workload"]["slug"],
            entry["implementation"]["provider"],
            run["operation_mode"],
        )
        for job in entry["jobs"]:
            if job["kind"] != "rerun" or not job.get("verdict") or len(job["samples"]) < 4:
                continue
            key, why = job_class(entry, measure, job, capped=capped)
            cards = (measure.get("gpu_uuid") or "", job.get("gpu_uuid") or "")
            pair = verdict_model.Pair(
                kernel=target[0],
                workload="/".join(target),
                key=key,
                same_card=bool(cards[0]) and cards[0] == cards[1],
                new=estimate(job),
                old=old,
                cards=cards,
            )
            started = (job.get("dates") or {}).get("started_at") or ""
            hosts = (
                verdict_model.host_kind(measure.get("environment")),
                verdict_model.host_kind(job.get("environment")),
            )
            counts = (len(measure["samples"]), len(job["samples"]))
            out.append(Rerun(pair, run["external_id"], started, job["verdict"], why, hosts, counts))
    return out


def _block_ids(job: dict):
    return (job.get("sampling") or {}).get("sample_blocks")


def first_reruns(rows: list[Rerun]) -> list[Rerun]:
    """The first rerun on another card of each run (by start time): the ones no selection of
    unsettled runs chose."""
    first = {}
    for row in sorted(rows, key=lambda r: r.started_at):
        if not row.pair.same_card:
            first.setdefault(row.run, row)
    return list(first.values())


def finite(value: float) -> bool:
    return value is not None and math.isfinite(value)
