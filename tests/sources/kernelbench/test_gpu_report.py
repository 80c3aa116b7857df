"""The dated report of KernelBench's GPU sweeps is what its script prints from the shipped files."""

import re
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "docs" / "reports" / "2026-12-06-h200-h100-kernelbench.md"


def _script():
    return load_script("kernelbench_gpu_report")


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


def test_measurements_on_two_gpu_models_are_never_paired():
    """The H200 (GPU-25fc3e73) and the H100s measured the same level-1 problems: only measurements
    on two cards of one model are compared, as the registry judges only those as reruns."""
    script = _script()
    measured = [entry for entry in script.entries() if entry.get("result")]
    model = lambda entry: entry["result"]["environment"]["gpu_name"]  # noqa: E731
    assert len({model(entry) for entry in measured}) >= 2
    pairs = script.pairs_of(measured)
    assert pairs
    for first, second in pairs:
        assert model(first) == model(second)
        assert first["result"]["gpu_uuid"] != second["result"]["gpu_uuid"]
        assert (first["sha256"], first["implementation"]) == (second["sha256"], second["implementation"])


def test_the_sources_doc_gives_the_first_h200_calls_problems_as_the_report_does():
    """docs/sources.md quotes the first H200 card's measurements from the report's line for it."""
    card = REPORT.read_text().split("### GPU-25fc3e73 (NVIDIA H200)", 1)[1]
    compiled, eager = re.search(
        r"\((\d+) level1 compile-inductor-default, (\d+) level1 eager\)", card
    ).groups()
    doc = " ".join((ROOT / "docs" / "sources.md").read_text().split())
    assert (
        f"On an H200 (GPU-25fc3e73, 2026-12-06) one call measured {eager} level-1 problems eager "
        f"and {compiled} under `torch.compile`" in doc
    )
