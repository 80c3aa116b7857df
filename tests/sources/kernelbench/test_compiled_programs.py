"""Which program a compiled KernelBench job timed. The served harness compiles problem after
problem, each from a file named `problem.py`; TorchDynamo keeps what it saw of a function by file
name, first line and name, so a problem whose `forward` sits at an earlier one's line is compiled
for symbolic sizes unless TorchDynamo is reset (harness.compiled). Real TorchDynamo on the CPU;
the shipped replay of the sweep files (scripts/kernelbench_compiled_shapes.py) checked on one."""

import gzip
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from registry.sources.kernelbench import harness, programs  # noqa: E402
from registry.sources.kernelbench.gpu_sweep import GPU_DIR  # noqa: E402
from tests.scripts import load_script  # noqa: E402

PROBLEM = """import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.{op}(x) * 2

def get_inputs():
    return [torch.rand({rows}, 64)]

def get_init_inputs():
    return []
"""
ROOT = Path(__file__).resolve().parents[3]
EAGER_BACKEND = {"backend": "eager", "mode": None}  # TorchDynamo's decisions without Inductor's compile


def compile_in_turn(compile_one) -> list[dict]:
    """Two problems whose `forward` sits at the same line, compiled one after the other in this
    process as the served harness does; the program each got."""
    torch._dynamo.reset()
    out = []
    for op, rows in (("relu", 32), ("tanh", 48)):
        namespace = {}
        exec(compile(PROBLEM.format(op=op, rows=rows), "problem.py", "exec"), namespace)  # noqa: S102
        model, inputs = namespace["Model"](), namespace["get_inputs"]()
        compile_one(model)(*inputs)
        out.append(harness.compiled_program(namespace))
    return out


class TestTheHarnessCompilesEachProblemAsItsOwn:
    def test_without_a_reset_the_second_problem_is_compiled_for_symbolic_sizes(self):
        first, second = compile_in_turn(lambda model: torch.compile(model, backend="eager"))
        assert first == {"sizes": {"L['x']": [32, 64]}, "dynamic": False}
        assert second == {"sizes": {"L['x']": ["s", 64]}, "dynamic": True}

    def test_the_harness_compiles_each_for_its_own_sizes(self):
        first, second = compile_in_turn(lambda model: harness.compiled(torch, model, EAGER_BACKEND))
        assert first == {"sizes": {"L['x']": [32, 64]}, "dynamic": False}
        assert second == {"sizes": {"L['x']": [48, 64]}, "dynamic": False}


def _line(problem: str, finished: str, seconds: float, **extra) -> str:
    return json.dumps(
        {
            "level": "level1",
            "problem": problem,
            "sha256": problem,
            "implementation": "compile-inductor-default",
            "finished_at": finished,
            "seconds": seconds,
            **extra,
        }
    )


class TestTheReplay:
    def test_a_file_is_cut_into_processes_where_one_died_or_another_command_resumed_it(self, tmp_path):
        script = load_script("kernelbench_compiled_shapes")
        lines = [
            _line("a", "2026-12-06T06:00:10Z", 10),
            _line("b", "2026-12-06T06:00:20Z", 10, error="the harness process died (exit -11)"),
            _line("c", "2026-12-06T06:00:30Z", 10),
            _line("d", "2026-12-06T06:10:00Z", 12),  # ten minutes later: another command
            json.dumps({**json.loads(_line("e", "2026-12-06T06:10:09Z", 9)), "implementation": "eager"}),
        ]
        path = tmp_path / "sweep.jsonl.gz"
        path.write_bytes(gzip.compress("\n".join(lines).encode()))
        runs = script.segments(path)
        assert [[entry["problem"] for entry in run] for run in runs] == [["a", "b"], ["c"], ["d"]]

    def test_the_shipped_file_is_what_replaying_a_sweep_file_gives(self):
        script = load_script("kernelbench_compiled_shapes")
        name = "2026-12-06T0619-GPU-d6216210-level2-compile.jsonl.gz"
        shipped = json.loads(programs.SHIPPED.read_text())
        assert shipped["files"][name] == script.replay(name)["lines"]
        assert set(shipped["files"]) == {p.name for p in GPU_DIR.glob("*.jsonl.gz") if "eager" not in p.name}


class TestAnnotate:
    def test_a_shipped_compiled_line_gets_its_replayed_program_and_others_stay_as_they_were(self):
        shipped = json.loads(programs.SHIPPED.read_text())
        name, lines = next(iter(shipped["files"].items()))
        replayed = lines[0]
        entry = {
            "sha256": replayed["sha256"],
            "finished_at": replayed["finished_at"],
            "implementation": "compile-inductor-default",
            "result": {"sampling": {"blocks": 3}},
        }
        program = programs.annotate(name, entry)["result"]["sampling"]["program"]
        assert (program["sizes"], program["dynamic"]) == (replayed["sizes"], replayed["dynamic"])
        assert program["from"].startswith("replayed (scripts/kernelbench_compiled_shapes.py, torch ")
        assert entry["result"]["sampling"] == {"blocks": 3}  # not changed in place
        recorded = {**entry, "result": {"sampling": {"program": {"sizes": {}, "dynamic": False}}}}
        assert programs.annotate(name, recorded) == recorded
        assert programs.annotate(name, {**entry, "implementation": "eager"})["result"]["sampling"] == {
            "blocks": 3
        }
        assert programs.annotate("another-file.jsonl.gz", entry) == entry


class TestTheFiguresThatShip:
    """The report and docs/protocol.md's paragraph on two compiled programs give what the shipped
    files give."""

    def test_the_report_is_what_the_script_writes_from_the_h100s_lines(self):
        script = load_script("compile_processes_report")
        folder = ROOT / "bench" / "results" / "compile-processes"
        written = (ROOT / "docs" / "reports" / "2026-12-07-kernelbench-compiled-programs.md").read_text()
        report = script.report(
            folder / "2026-12-07-h100-GPU-4d57d9ff.jsonl",
            folder / "2026-12-07-h100-GPU-e291e563-served.jsonl",
        )
        assert written == report + "\n"
        assert "- 9 problems, 9 compiled for their own sizes: 0.993 to 1.009 times" in written
        assert "- 14 jobs compiled for their own sizes: 0.996 to 1.022 times" in written
        assert "- 9 jobs compiled for symbolic sizes: 1.582 to 2.542 times" in written

    def test_the_protocols_paragraph_gives_the_shipped_counts(self):
        from registry.sources.kernelbench import pairs
        from registry.stats import verdict_model

        text = " ".join((ROOT / "docs" / "protocol.md").read_text(encoding="utf-8").split())
        lines = [line for file in json.loads(programs.SHIPPED.read_text())["files"].values() for line in file]
        symbolic = sum(line["dynamic"] for line in lines)
        assert f"{symbolic} of the {len(lines)} compiled lines were compiled for symbolic sizes" in text
        apart = {
            gpu: sum(_second(p.key) == verdict_model.PROGRAMS_CLASS for p in pairs.pairs(gpu))
            for gpu in ("nvidia-h200", "nvidia-h100-80gb-hbm3")
        }
        total = sum(apart.values())
        assert (
            f"{total} shipped reruns are such ({apart['nvidia-h200']} on the H200s, "
            f"{apart['nvidia-h100-80gb-hbm3']} on the H100s)" in text
        )


def _second(key: str) -> str:
    return key.split("|")[1]
