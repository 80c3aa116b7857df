#!/usr/bin/env python3
"""Which program did each compiled KernelBench job time? The sweep's harness (`harness --serve`)
compiled problem after problem in one process, each from a file named `problem.py`, before
2026-12-07. TorchDynamo keeps what it saw of each function by file name, first line and name
(its automatic dynamic shapes): a problem whose `Model.forward` sat at the same line as an
earlier problem's, with an input of the same name and another shape, was compiled with that
input's sizes symbolic, a program for any size, not the static one a problem compiled alone
gets. This replays every shipped sweep file's compiled problems in the order its processes
compiled them, with TorchDynamo itself on the CPU (inputs and weights on PyTorch's `meta`
device, so nothing is computed), and records the graph each got: `static`, or the input shapes
with their symbolic sizes. No Django; needs torch.

    .venv/bin/python scripts/kernelbench_compiled_shapes.py [--jobs 2] \\
        > registry/sources/kernelbench/data/gpu/compiled-programs.json

A file's process is taken as started again where a line says the harness died or ran past its
timeout, and where the time between two lines' ends is longer than the later line took by more
than GAP_S (another sweep command resumed the file: a new process).
"""

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.sources.kernelbench.gpu_sweep import BUNDLED, GPU_DIR, output_lines, problems  # noqa: E402
from registry.sources.kernelbench.harness import compiled_program  # noqa: E402

GAP_S = (
    5.0  # within one process a line ends at most 2 s after the last plus its own seconds (the shipped files)
)
RESTARTS = ("the harness process died", "ran past the problem timeout")


def segments(path: Path) -> list[list[dict]]:
    """The file's compiled lines, by the harness process that compiled them (see the module)."""
    runs, current, last_end = [], [], None
    for text in output_lines(path):
        if not text.strip():
            continue
        entry = json.loads(text)
        end = datetime.strptime(entry["finished_at"], "%Y-%m-%dT%H:%M:%SZ").timestamp()
        if last_end is not None and end - last_end > float(entry.get("seconds") or 0) + GAP_S and current:
            runs.append(current)
            current = []
        last_end = end
        if entry["implementation"] != "eager":
            current.append(entry)
        if any(entry.get("error", "").startswith(why) for why in RESTARTS) and current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def replay(path_name: str) -> dict:
    """Every compiled line of one sweep file, replayed process by process: the sizes TorchDynamo
    compiled its `Model.forward` for (harness.compiled_program) and whether any was symbolic."""
    import torch

    texts = {
        p["sha256"]: p["problem_text"] for p in problems(BUNDLED, ["level1", "level2", "level3", "level4"])
    }
    out = []
    for number, run in enumerate(segments(GPU_DIR / path_name)):
        torch._dynamo.reset()  # a new harness process
        for entry in run:
            namespace = {"__name__": "kernelbench_problem"}
            exec(compile(texts[entry["sha256"]], "problem.py", "exec"), namespace)  # noqa: S102
            error = ""
            try:
                with torch.device("meta"):
                    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
                    inputs = namespace["get_inputs"]()
                    torch.compile(model, backend=lambda gm, example_inputs: gm.forward)(*inputs)
            except Exception as exc:  # noqa: BLE001 - traced on `meta` after its sizes were decided
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"[:200]
            program = compiled_program(namespace)
            out.append(
                {
                    "problem": f"{entry['level']}/{entry['problem']}",
                    "sha256": entry["sha256"],
                    "finished_at": entry["finished_at"],
                    "process": number,
                    **program,
                    **({"meta_error": error} if error else {}),
                }
            )
    return {"file": path_name, "lines": out}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--file", action="append", help="one sweep file's name (default: every one)")
    args = parser.parse_args(argv)
    import torch

    names = args.file or [p.name for p in sorted(GPU_DIR.glob("*.jsonl.gz"))]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        files = list(pool.map(replay, names))
    document = {
        "format": "kernelindex-kernelbench-compiled-programs/v1",
        "replayed_with": f"torch {torch.__version__}",
        "files": {f["file"]: f["lines"] for f in files if f["lines"]},
    }
    json.dump(document, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
