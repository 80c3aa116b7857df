"""How long a GPU takes to settle: long, uninterrupted sampling of shipped workloads on each card.

    python bench/warmup_drift.py --out DIR [--seconds 4] [--per-kernel 1]      (on a GPU host)
    python bench/warmup_drift.py --analyse DIR                                  (anywhere)

The first form runs, on every GPU of the host at once (one process per card,
CUDA_VISIBLE_DEVICES), the workloads of the shipped controlled runs (registry/data/controlled-runs)
whose rerun did not agree, one per kernel, plus the reference workload, through the real harness
(`run_job_spec`) with the precision stop turned off, so each is sampled for `--seconds` without a
pause. It writes DIR/gpu<N>.json: every sample, the GPU's state and UUID.

The second form reads those files and prints, for each warm-up length, how far the medians of the
same workload on two cards then lie apart, and how far the median of each card's early samples
lies from its settled median (docs/protocol.md, "Warm-up").
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHIPPED = ROOT / "registry" / "data" / "controlled-runs"
REFERENCE = ("geglu", "batch8-hidden4096-intermediate11008-seq8192-bf16", "backward")
WARMUPS_S = (0.025, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0)
WINDOW_S = 1.0  # sampling time after the warm-up whose median is compared


def chosen(per_kernel: int) -> list[dict]:
    """The shipped latency runs whose rerun did not agree (the largest |difference| first, at most
    `per_kernel` of each kernel), and both providers of the reference workload."""
    picked, seen = [], {}
    entries = [
        entry
        for path in sorted(SHIPPED.glob("*.json.gz"))
        for entry in json.loads(gzip.decompress(path.read_bytes()))["runs"]
    ]
    for entry in entries:
        run, jobs = entry["run"], entry["jobs"]
        if run["metric"] != "latency" or not any(job.get("sampling") for job in jobs):
            continue
        reference = (entry["kernel"]["slug"], entry["workload"]["slug"], run["operation_mode"]) == REFERENCE
        verdicts = [job for job in jobs if job["kind"] == "rerun" and job.get("verdict")]
        if reference or (
            verdicts and verdicts[0]["verdict"] != "agrees" and verdicts[0]["deviation"] is not None
        ):
            deviation = 1.0 if reference else abs(verdicts[0]["deviation"])
            picked.append((deviation, entry))
    out, taken = [], set()
    for deviation, entry in sorted(picked, key=lambda item: -item[0]):
        kernel = entry["kernel"]["slug"]
        key = (
            kernel,
            entry["workload"]["slug"],
            entry["implementation"]["provider"],
            entry["run"]["operation_mode"],
        )
        if key in taken or (deviation < 1.0 and seen.get(kernel, 0) >= per_kernel):
            continue
        taken.add(key)
        seen[kernel] = seen.get(kernel, 0) + 1
        out.append(entry)
    return out


def spec_of(entry: dict) -> dict:
    from registry.models import Kernel, Workload
    from registry.reruns.models import JobKind, RerunJob
    from registry.reruns.services.worker import job_spec

    workload = entry["workload"]
    job = RerunJob(
        kind=JobKind.MEASURE,
        kernel=Kernel(slug=entry["kernel"]["slug"]),
        workload=Workload(
            x_name=workload["x_name"],
            x_value=workload["x_value"],
            parameters=workload["parameters"],
            dtype=workload["dtype"],
        ),
        provider=entry["implementation"]["provider"],
        operation_mode=entry["run"]["operation_mode"],
        metric="latency",
        gpu_slug=entry["environment"]["slug"],
    )
    return job_spec(job)


def measure(out: Path, seconds: float, per_kernel: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    django.setup()
    from django.conf import settings

    from registry.reruns.harness import run_job_spec

    # Sample for `seconds` whatever the precision: the stop is what is being studied.
    settings.CONTROLLED_TIMING = {
        **settings.CONTROLLED_TIMING,
        "budget_s": seconds,
        "precision": 0.0,
        "max_samples": 10**7,
    }
    results = []
    for entry in chosen(per_kernel):
        spec = spec_of(entry)
        answer = run_job_spec(spec, timeout_s=300)
        results.append(
            {
                "kernel": spec["kernel"],
                "workload": entry["workload"]["slug"],
                "provider": spec["provider"],
                "operation_mode": spec["operation_mode"],
                "status": answer["status"],
                "error": answer.get("error", "")[-500:],
                "samples": answer.get("samples", []),
                "sampling": answer.get("sampling", {}),
                "gpu_uuid": answer.get("gpu_uuid", ""),
                "gpu_state": answer.get("gpu_state", {}),
                "upstream": answer.get("upstream", {}),
            }
        )
        print(
            spec["kernel"],
            spec["provider"],
            spec["operation_mode"],
            answer["status"],
            len(results[-1]["samples"]),
            flush=True,
        )
    out.mkdir(parents=True, exist_ok=True)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
    (out / f"gpu{gpu}.json").write_text(json.dumps({"seconds": seconds, "results": results}))


def fleet(out: Path, seconds: float, per_kernel: int) -> None:
    """One process per GPU, all at once."""
    count = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU "))
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--out",
                str(out),
                "--seconds",
                str(seconds),
                "--per-kernel",
                str(per_kernel),
                "--one",
            ],
            env={**os.environ, "CUDA_VISIBLE_DEVICES": str(index)},
        )
        for index in range(max(count, 1))
    ]
    sys.exit(max(child.wait() for child in children))


def settled_samples(result: dict, warmup_s: float) -> np.ndarray:
    """The samples taken between `warmup_s` and `warmup_s + WINDOW_S` of sampling, the sampling
    time of each placed by its share of the job's timing seconds."""
    samples = np.array(result["samples"])
    elapsed = np.linspace(0, result["sampling"]["timing_s"], samples.size, endpoint=False)
    return samples[(elapsed >= warmup_s) & (elapsed < warmup_s + WINDOW_S)]


def analyse(folder: Path) -> None:
    runs = {}
    for path in sorted(folder.glob("gpu*.json")):
        for result in json.loads(path.read_text())["results"]:
            if result["status"] == "ok" and result["samples"]:
                key = (result["kernel"], result["workload"], result["provider"], result["operation_mode"])
                runs.setdefault(key, []).append(result)
    pairs = [results for results in runs.values() if len(results) >= 2]
    print(f"workloads: {len(runs)}, measured on two cards: {len(pairs)}")
    print(
        "warm-up  |card A - card B| of medians (median, max, share within 1%, within 2%)  |early - settled| on one card"
    )
    for warmup in WARMUPS_S:
        apart, drift = [], []
        for a, b in pairs:
            sa, sb = settled_samples(a, warmup), settled_samples(b, warmup)
            if sa.size and sb.size:
                apart.append(abs(np.median(sa) / np.median(sb) - 1))
        for results in runs.values():
            for result in results:
                early, late = (
                    settled_samples(result, warmup),
                    np.array(result["samples"])[-max(len(result["samples"]) // 4, 1) :],
                )
                if early.size:
                    drift.append(abs(np.median(early) / np.median(late) - 1))
        apart, drift = np.array(apart), np.array(drift)
        print(
            f"{warmup:6.3f} s  {np.median(apart):6.2%} {apart.max():6.2%} {(apart <= 0.01).mean():5.0%} {(apart <= 0.02).mean():5.0%}"
            f"   median {np.median(drift):6.2%} max {drift.max():6.2%}"
        )
    print("\nper workload, after 1 s: medians on each card, and the first and last 10% of one card's samples")
    for key, results in sorted(runs.items()):
        medians = [
            np.median(settled_samples(r, 1.0)) if settled_samples(r, 1.0).size else float("nan")
            for r in results
        ]
        s = np.array(results[0]["samples"])
        tenth = max(s.size // 10, 1)
        print(
            f"  {key[0]:28} {key[2]:24} {key[3]:8} {' '.join(f'{m:9.4f}' for m in medians)}"
            f"   early {np.median(s[:tenth]):9.4f} late {np.median(s[-tenth:]):9.4f} n={s.size}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--analyse", type=Path)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--per-kernel", type=int, default=1)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.analyse:
        analyse(args.analyse)
    elif args.one:
        measure(args.out, args.seconds, args.per_kernel)
    else:
        fleet(args.out, args.seconds, args.per_kernel)


if __name__ == "__main__":
    main()
