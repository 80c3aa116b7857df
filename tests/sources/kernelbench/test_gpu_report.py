"""The dated report of KernelBench's GPU sweeps is what its script prints from the shipped files."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "docs" / "reports" / "2026-12-06-h200-kernelbench.md"


def _script():
    spec = importlib.util.spec_from_file_location(
        "kernelbench_gpu_report", ROOT / "scripts" / "kernelbench_gpu_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_is_what_the_script_prints_from_the_shipped_files():
    script = _script()
    found = script.entries()
    assert found, "no shipped GPU sweep file"
    assert REPORT.read_text() == script.report(found)


def test_a_changed_sample_changes_the_report():
    script = _script()
    found = script.entries()
    first = found[0]["result"]
    first["samples"] = [
        value * 1.5 if block == 0 else value
        for value, block in zip(first["samples"], first["sampling"]["sample_blocks"], strict=True)
    ]
    assert script.report(found) != REPORT.read_text()
