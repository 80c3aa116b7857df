"""Does a problem under `torch.compile` run at one speed on one card, process after process? Each
chosen KernelBench problem is measured compiled (kernelindex-cuda-v1, the sweep's settings) in
several fresh processes in turn on this host's GPU, each with caches of its own (Inductor's and
Triton's in a new folder, so every process compiles and autotunes afresh, as a new host does), and
each process's program is fingerprinted: the code Inductor generated, and the configurations its
autotuning chose. Runs on a GPU host from a copy of the repository; no Django.

    python -m bench.compile_processes --out var/compile-processes.jsonl --processes 3 \\
        --problem level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py ...

One JSON line per process, written as it ends; a second run on the same file measures only what is
not in it yet. `scripts/compile_processes_report.py` reads the lines.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from registry.reruns.harness.timing import DEFAULT_SETTINGS
from registry.sources.kernelbench.gpu_sweep import BUNDLED, problems
from registry.sources.kernelbench.harness import HarnessError, run_spec

IMPLEMENTATION = "compile-inductor-default"
# What an autotuning's chosen configuration records that is not the program: the cache's hash,
# how it was found, and how long the search took (which differed between two processes that chose
# the same configuration: GPU-4d57d9ff, 2026-12-07).
NOT_THE_PROGRAM = ("triton_cache_hash", "found_by_coordesc", "time_taken_ms")


def fingerprint(folder: Path) -> dict:
    """The program a process compiled, read from its cache folder: a digest of the Python files
    Inductor generated (the folder's own path taken out) and of the autotuning's chosen
    configurations (`*.best_config`), with how many of each there were."""
    code, configs = [], []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".py":
            text = path.read_text(errors="replace").replace(str(folder), "<cache>")
            code.append(hashlib.sha256(text.encode()).hexdigest())
        elif path.name.endswith(".best_config"):
            try:
                chosen = json.loads(path.read_text())
            except ValueError:
                continue
            kept = {k: v for k, v in chosen.items() if k not in NOT_THE_PROGRAM}
            configs.append(json.dumps(kept, sort_keys=True))
    return {
        "code": hashlib.sha256("\n".join(sorted(code)).encode()).hexdigest()[:16],
        "code_files": len(code),
        "configs": hashlib.sha256("\n".join(sorted(configs)).encode()).hexdigest()[:16],
        "configs_chosen": len(configs),
        "chosen": sorted(configs),
    }


def measure(problem: dict, budget: float, device: str = "cuda") -> dict:
    with tempfile.TemporaryDirectory(prefix="ki-compile-") as scratch:
        folder = Path(scratch)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
        os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
        spec = {
            "problem_text": problem["problem_text"],
            "implementation": IMPLEMENTATION,
            "device": device,
            "timing": {**DEFAULT_SETTINGS, "budget_s": budget},
        }
        began = time.monotonic()
        try:
            result = run_spec(spec)
        except HarnessError as exc:
            return {"error": str(exc)[-500:], "seconds": round(time.monotonic() - began, 1)}
        return {
            "median": result["median"],
            "samples": result["samples"],
            "sample_blocks": result["sampling"].get("sample_blocks"),
            "upstream_mean": (result.get("upstream") or {}).get("mean"),
            "gpu_uuid": result["gpu_uuid"],
            "gpu_name": result["environment"]["gpu_name"],
            "program": fingerprint(folder),
            "seconds": round(time.monotonic() - began, 1),
        }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--problem", dest="names", action="append", required=True, help="level/file")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of sampling a block set")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--deadline", type=float, default=500.0, help="seconds; no process starts after")
    args = parser.parse_args(argv)
    began = time.monotonic()
    wanted = {tuple(name.split("/", 1)) for name in args.names}
    chosen = [
        p
        for p in problems(BUNDLED, sorted({level for level, _ in wanted}))
        if (p["level"], p["problem"]) in wanted
    ]
    missing = wanted - {(p["level"], p["problem"]) for p in chosen}
    if missing:
        parser.error(f"no such problem in the newest version: {sorted(missing)}")
    done = {}
    if args.out.is_file():
        for line in args.out.read_text().splitlines():
            entry = json.loads(line)
            done[entry["level"], entry["problem"]] = done.get((entry["level"], entry["problem"]), 0) + 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        for round_ in range(args.processes):  # problem after problem, round after round
            for problem in chosen:
                key = (problem["level"], problem["problem"])
                if done.get(key, 0) > round_:
                    continue
                if time.monotonic() - began > args.deadline:
                    print("deadline", flush=True)
                    return 0
                entry = {
                    "level": key[0],
                    "problem": key[1],
                    "process": round_,
                    **measure(problem, args.budget, args.device),
                }
                out.write(json.dumps(entry) + "\n")
                out.flush()
                done[key] = done.get(key, 0) + 1
                program = entry.get("program") or {}
                print(
                    f"{key[0]}/{key[1]} #{round_}: {entry.get('median', entry.get('error', ''))} "
                    f"code {program.get('code')} configs {program.get('configs')} ({entry['seconds']} s)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
