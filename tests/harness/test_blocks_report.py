"""The dated report of jobs sampled in independent blocks on an H100
(docs/reports/2026-12-06-h100-blocks.md) is what scripts/blocks_report.py prints from the sweep's
exports in bench/results/blocks-h100/, and the figures it rests on hold there."""

from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reports" / "2026-12-06-h100-blocks.md"


def _script():
    return load_script("blocks_report")


def test_the_report_is_what_the_script_prints():
    assert REPORT.read_text() == _script().report()


def test_every_pair_is_block_sampled_on_one_card_and_every_block_was_read_while_timed():
    script = _script()
    rows = script.same_card_rows(script.RESULTS)
    assert len(rows) >= 100
    assert all(row.pair.old.independent and row.pair.new.independent for row in rows)
    assert all(row.pair.cards[0] == row.pair.cards[1] for row in rows)
    jobs = script.latency_jobs(script.RESULTS)
    assert all(block.get("readings", 0) >= 1 for job in jobs for block in job["gpu_state"]["blocks"])
    assert not any("before" in job["gpu_state"] or "after" in job["gpu_state"] for job in jobs)
