"""Which program a compiled KernelBench job timed (`sampling.program`: the sizes TorchDynamo
compiled the problem's `Model.forward` for, and whether any was symbolic). The harness records it
since 2026-12-07 (harness.compiled_program); for the lines of the shipped sweep files, written
before, it comes from data/gpu/compiled-programs.json, the replay of their processes by
scripts/kernelbench_compiled_shapes.py. Two jobs of one problem that hold different programs
did not time one thing (verdict_model.programs_differ). No Django."""

import functools
import json

from registry.sources.kernelbench.gpu_sweep import GPU_DIR

SHIPPED = GPU_DIR / "compiled-programs.json"


@functools.cache
def _replayed() -> dict:
    if not SHIPPED.is_file():
        return {}
    document = json.loads(SHIPPED.read_text())
    return {
        (name, line["sha256"], line["finished_at"]): {
            "sizes": line["sizes"],
            "dynamic": line["dynamic"],
            "from": "replayed (scripts/kernelbench_compiled_shapes.py, " + document["replayed_with"] + ")",
        }
        for name, lines in document["files"].items()
        for line in lines
    }


def annotate(file_name: str, entry: dict) -> dict:
    """The sweep line `entry` of the file `file_name` with its compiled program in its result's
    sampling, where the harness did not record one and the replay holds it; otherwise as it was."""
    result = entry.get("result")
    if not isinstance(result, dict) or entry.get("implementation") == "eager":
        return entry
    sampling = result.get("sampling")
    if not isinstance(sampling, dict) or "program" in sampling:
        return entry
    program = _replayed().get((file_name, entry.get("sha256"), entry.get("finished_at")))
    if program is None:
        return entry
    return {**entry, "result": {**result, "sampling": {**sampling, "program": program}}}
