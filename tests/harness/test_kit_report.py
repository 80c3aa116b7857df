"""The dated report of the reproduction kit on an H200 (docs/reports/2026-12-01-h200-kit.md) is
what scripts/kit_report.py prints from the kit's result files, judged against the shipped
controlled runs by the site's own rule."""

import copy
from pathlib import Path

import pytest

from registry.reruns.controlled import controlled_runs_load
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reports" / "2026-12-01-h200-kit.md"

pytestmark = pytest.mark.django_db


def _script():
    return load_script("kit_report")


@pytest.fixture
def script():
    module = _script()
    for path in module.controlled_files(module.result_files()):
        controlled_runs_load(path=path)
    return module


def test_the_report_is_what_the_script_prints_from_the_shipped_files(script):
    results = script.result_files()
    assert [result["file"] for result in results] == ["repro-2538.json", "repro-2539.json"]
    assert REPORT.read_text() == script.report(results)


def test_a_changed_sample_changes_the_verdicts_figures(script):
    results = copy.deepcopy(script.result_files())
    results[1]["samples"] = [value * 1.1 for value in results[1]["samples"]]
    assert script.report(results) != REPORT.read_text()
