"""bench/compile_processes.py's fingerprint of a compiled program, and the report
scripts/compile_processes_report.py writes from its lines: processes that compiled different
programs are told apart from processes that ran one program at different speeds."""

import json
import random

from bench.compile_processes import fingerprint
from tests.scripts import load_script


def _cache(folder, *, code: str, block: int):
    (folder / "inductor" / "ab").mkdir(parents=True)
    (folder / "inductor" / "ab" / "kernel.py").write_text(f"# loaded from {folder}/inductor/ab\n{code}\n")
    (folder / "inductor" / "ab" / "kernel.best_config").write_text(
        json.dumps({"XBLOCK": block, "num_warps": 4, "triton_cache_hash": str(folder)})
    )


class TestFingerprint:
    def test_the_same_program_in_two_folders_has_one_fingerprint(self, tmp_path):
        first, second = tmp_path / "one", tmp_path / "two"
        _cache(first, code="def call(): pass", block=128)
        _cache(second, code="def call(): pass", block=128)
        a, b = fingerprint(first), fingerprint(second)
        assert (a["code"], a["configs"]) == (b["code"], b["configs"])
        assert a["code_files"] == 1 and a["configs_chosen"] == 1

    def test_another_configuration_or_other_code_changes_it(self, tmp_path):
        base, config, code = tmp_path / "base", tmp_path / "config", tmp_path / "code"
        _cache(base, code="def call(): pass", block=128)
        _cache(config, code="def call(): pass", block=256)
        _cache(code, code="def call(): return 1", block=128)
        assert fingerprint(base)["configs"] != fingerprint(config)["configs"]
        assert fingerprint(base)["code"] == fingerprint(config)["code"]
        assert fingerprint(base)["code"] != fingerprint(code)["code"]


def _line(problem: str, process: int, median: float, code: str, rng) -> str:
    samples = [median * (1 + rng.gauss(0, 0.002)) for _ in range(30)]
    return json.dumps(
        {
            "level": "level2",
            "problem": problem,
            "process": process,
            "median": median,
            "samples": samples,
            "sample_blocks": [block for block in range(3) for _ in range(10)],
            "gpu_uuid": "GPU-43d4bb4e-ac9f",
            "gpu_name": "NVIDIA H200",
            "program": {"code": code, "configs": "k", "code_files": 2, "configs_chosen": 1, "chosen": []},
            "seconds": 9.0,
        }
    )


def test_the_report_tells_a_program_that_changed_from_one_that_ran_slower(tmp_path):
    rng = random.Random(3)
    lines = [
        _line("1_Steady.py", 0, 1.0, "c", rng),
        _line("1_Steady.py", 1, 1.0, "c", rng),
        _line("2_Recompiled.py", 0, 2.0, "c0", rng),
        _line("2_Recompiled.py", 1, 3.0, "c1", rng),
        _line("3_Slowed.py", 0, 4.0, "c", rng),
        _line("3_Slowed.py", 1, 4.4, "c", rng),
    ]
    path = tmp_path / "processes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    text = load_script("compile_processes_report").report(path)
    rows = {
        line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| level2/")
    }
    assert "| 1 / 1 | 0." in rows["level2/1_Steady.py"]
    assert "| +50." in rows["level2/2_Recompiled.py"] and "| 2 / 1 | — |" in rows["level2/2_Recompiled.py"]
    assert "| 1 / 1 | 10." in rows["level2/3_Slowed.py"]
    assert "2 of 3 problems ran more than 2% apart" in text and "in 1 of them the processes compiled" in text
