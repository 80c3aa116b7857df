#!/usr/bin/env python3
"""What `bench/compile_processes.py` measured: each KernelBench problem under `torch.compile` in
several fresh processes on one card, as Markdown on standard output. For each problem, every
process's median with its 90% interval from its own independent blocks (registry/stats, the
verdict's interval), how far the processes' medians lie apart, and whether the programs the
processes compiled were the same (the code Inductor generated; the configurations its autotuning
chose). No Django.

    .venv/bin/python scripts/compile_processes_report.py bench/results/compile-processes/FILE.jsonl \\
        [--served bench/results/compile-processes/SWEEP.jsonl]
"""

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.compile_processes import NOT_THE_PROGRAM  # noqa: E402
from registry.stats import intervals  # noqa: E402

CONFIDENCE = 0.90  # the verdict model's (verdict_model.VERDICT_CONFIDENCE)


def entries(path: Path) -> dict[tuple[str, str], list[dict]]:
    by_problem = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            by_problem[entry["level"], entry["problem"]].append(entry)
    return dict(by_problem)


def problem_figures(processes: list[dict]) -> dict:
    """The processes' medians, the largest relative difference between two of them with the
    interval of that difference, and how many distinct programs (code, configurations) they ran."""
    measured = [p for p in processes if "median" in p]
    estimates = [intervals.median_estimate(p["samples"], block_ids=p.get("sample_blocks")) for p in measured]
    if len(estimates) < 2:
        return {"processes": len(processes), "measured": len(measured)}
    low, high = (
        min(range(len(estimates)), key=lambda i: estimates[i].log_median),
        max(range(len(estimates)), key=lambda i: estimates[i].log_median),
    )
    difference = intervals.difference(estimates[high], estimates[low], confidence=CONFIDENCE)
    programs = [(p["program"]["code"], _configs(p["program"])) for p in measured]
    return {
        "processes": len(processes),
        "measured": len(measured),
        "medians": [p["median"] for p in measured],
        "spread": math.expm1(estimates[high].log_median - estimates[low].log_median),
        "spread_low": difference.low,
        "codes": len({code for code, _ in programs}),
        "configs": len({configs for _, configs in programs}),
        "same_program_spread": _same_program_spread(measured, estimates, programs),
        "cards": sorted({p["gpu_uuid"][:12] for p in measured}),
        "gpu": measured[0]["gpu_name"],
    }


def _configs(program: dict) -> tuple:
    """The configurations a process's autotuning chose, without what is not the program
    (compile_processes.NOT_THE_PROGRAM: files written before it left out `time_taken_ms` too)."""
    chosen = [json.loads(text) for text in program.get("chosen") or ()]
    return tuple(
        sorted(
            json.dumps({k: v for k, v in c.items() if k not in NOT_THE_PROGRAM}, sort_keys=True)
            for c in chosen
        )
    )


def _same_program_spread(measured, estimates, programs) -> float | None:
    """The largest relative difference between two processes that compiled the same program."""
    spreads = []
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            if programs[i] == programs[j]:
                spreads.append(math.expm1(abs(estimates[i].log_median - estimates[j].log_median)))
    return max(spreads) if spreads else None


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def served_beside(figures: dict, served: Path) -> list[str]:
    """A sweep's compiled lines (`gpu_sweep`, problems served one after another in one harness
    process) beside the fresh processes' median of the same problems: the program each compiled
    (its `sampling.program`) and how far its median lies from theirs."""
    fresh = {key: statistics.median(f["medians"]) for key, f in figures.items() if f.get("measured", 0) >= 2}
    rows, ratios = [], []
    for text in served.read_text().splitlines():
        entry = json.loads(text) if text.strip() else {}
        result = entry.get("result") or {}
        key = (entry.get("level"), entry.get("problem"))
        if key not in fresh or not result:
            continue
        program = result["sampling"].get("program") or {}
        ratios.append(result["median"] / fresh[key])
        sizes = "symbolic" if program.get("dynamic") else ("its own" if program else "not recorded")
        rows.append(
            f"| {key[0]}/{key[1]} | {result['gpu_uuid'][:12]} | {result['median']:.4g} | {sizes} | {ratios[-1]:.3f} |"
        )
    name = _shown(served)
    return [
        "## Served one after another in one process",
        "",
        f"`{name}`: the same problems measured by `gpu_sweep` in one harness process, one after "
        "another as a sweep serves them, by the harness that resets TorchDynamo before each compile.",
        "",
        "| problem | card | median (ms) | compiled for | over the fresh processes' median |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"- {len(ratios)} problems, {sum('| its own |' in r for r in rows)} compiled for their own sizes: "
        f"{min(ratios):.3f} to {max(ratios):.3f} times the fresh processes' median.",
        "",
    ]


def report(path: Path, served: Path | None = None) -> str:
    by_problem = entries(path)
    figures = {key: problem_figures(processes) for key, processes in sorted(by_problem.items())}
    measured = [f for f in figures.values() if f.get("measured", 0) >= 2]
    cards = sorted({card for f in measured for card in f["cards"]})
    lines = [
        f"# `torch.compile` process by process: {measured[0]['gpu'] if measured else 'no card'}",
        "",
        f"Written by `.venv/bin/python scripts/compile_processes_report.py {_shown(path)}"
        + (f" --served {_shown(served)}`" if served else "`")
        + " from the lines `bench/compile_processes.py` wrote: each problem compiled and measured "
        "(kernelindex-cuda-v1, three independent blocks) in several fresh processes in turn, each with "
        f"Inductor's and Triton's caches of its own, on {', '.join(cards) or 'no card'}.",
        "",
        "| problem | processes | medians (ms) | largest difference | its 90% interval's lower end | "
        "programs: code / configurations | largest difference, same program |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (level, problem), f in figures.items():
        if f.get("measured", 0) < 2:
            lines.append(f"| {level}/{problem} | {f['processes']} ({f['measured']} measured) | | | | | |")
            continue
        same = f["same_program_spread"]
        lines.append(
            f"| {level}/{problem} | {f['measured']} | {', '.join(f'{m:.4g}' for m in f['medians'])} | "
            f"{f['spread']:+.1%} | {f['spread_low']:+.1%} | {f['codes']} / {f['configs']} | "
            f"{'—' if same is None else f'{same:.1%}'} |"
        )
    apart = [f for f in measured if f["spread_low"] > 0.02]
    explained = [f for f in apart if f["codes"] > 1 or f["configs"] > 1]
    lines += [
        "",
        f"{len(apart)} of {len(measured)} problems ran more than 2% apart in different processes (the "
        "lower end of the difference's 90% interval beyond +2%); in "
        f"{len(explained)} of them the processes compiled different programs (code or configurations).",
        "",
    ]
    return "\n".join(lines + shipped_beside(figures) + (served_beside(figures, served) if served else []))


def shipped_beside(figures: dict) -> list[str]:
    """The shipped sweep files' compiled jobs of the same problems on the same GPU model, each with
    the program the replay finds it compiled (registry/sources/kernelbench/programs.py) and its
    median over the fresh processes' median."""
    from registry.sources.kernelbench import programs
    from registry.sources.kernelbench.gpu_sweep import GPU_DIR, output_lines

    fresh = {key: statistics.median(f["medians"]) for key, f in figures.items() if f.get("measured", 0) >= 2}
    gpu = next((f["gpu"] for f in figures.values() if f.get("measured", 0) >= 2), "")
    rows, ratios = [], {True: [], False: []}
    for path in sorted(GPU_DIR.glob("*.jsonl.gz")):
        for text in output_lines(path):
            entry = programs.annotate(path.name, json.loads(text)) if text.strip() else {}
            result = entry.get("result") or {}
            key = (entry.get("level"), entry.get("problem"))
            if (
                key not in fresh
                or entry["implementation"] == "eager"
                or result["environment"]["gpu_name"] != gpu
            ):
                continue
            program = result["sampling"].get("program") or {}
            ratio = result["median"] / fresh[key]
            if "dynamic" in program:
                ratios[program["dynamic"]].append(ratio)
            sizes = "symbolic" if program.get("dynamic") else ("its own" if program else "not known")
            rows.append(
                f"| {key[0]}/{key[1]} | {result['gpu_uuid'][:12]} | {path.name} | {result['median']:.4g} | "
                f"{sizes} | {ratio:.2f} |"
            )
    if not rows:
        return []
    lines = [
        "## The shipped jobs of these problems",
        "",
        f"The compiled jobs of the same problems on {gpu} in the shipped sweep files, with the sizes "
        "TorchDynamo compiled each for (`registry/sources/kernelbench/data/gpu/compiled-programs.json`, "
        "`scripts/kernelbench_compiled_shapes.py`) and each median over the median of the fresh "
        "processes above.",
        "",
        "| problem | card | sweep file | median (ms) | compiled for | over the fresh processes' median |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
    for dynamic, words in ((False, "their own sizes"), (True, "symbolic sizes")):
        if ratios[dynamic]:
            lines.append(
                f"- {len(ratios[dynamic])} jobs compiled for {words}: {min(ratios[dynamic]):.3f} to "
                f"{max(ratios[dynamic]):.3f} times the fresh processes' median."
            )
    return lines + [""]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument(
        "--served", type=Path, help="a gpu_sweep output file of the same problems, to set beside"
    )
    args = parser.parse_args()
    print(report(args.path.resolve(), args.served.resolve() if args.served else None))
