"""The dated report of the H200 sweep by date and card (docs/reports/2026-12-04-h200-sweep-log.md)
is what scripts/sweep_log_report.py prints from the shipped controlled runs and the hosts' log;
the log's figures appear only quoted, as a log."""

import copy
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reports" / "2026-12-04-h200-sweep-log.md"


def _script():
    return load_script("sweep_log_report")


def test_the_report_is_what_the_script_prints_from_the_shipped_files():
    assert REPORT.read_text() == _script().report()


def test_a_changed_verdict_changes_the_report():
    script = _script()
    found = copy.deepcopy(script.jobs())
    rerun = next(
        job
        for job in found
        if job["verdict"] == "agrees" and job["measured_on"] and job["gpu_uuid"] != job["measured_on"]
    )
    rerun["verdict"] = "disagrees"
    assert script.report(found) != REPORT.read_text()


def test_the_hosts_log_is_quoted_whole_after_the_results():
    text = REPORT.read_text()
    results, log = text.split("## The hosts' log\n", 1)
    quoted = [line for line in log.splitlines() if line.startswith(">")]
    assert quoted and all(line.startswith(">") for line in log.strip().splitlines()[2:])
    assert "a log, not a result" in log.split(">", 1)[0]
    assert not any(line.startswith(">") for line in results.splitlines())
