"""docs/reports/ holds dated measurements, each written by the script that computes it and checked
against that script by a test, or a log whose figures are quoted as a log and never as results
(docs/index.md, "Reports"; STYLE.md, "README and docs")."""

import re

from tests.docs.commands import ROOT

REPORTS = ROOT / "docs" / "reports"

# Report -> (the script that writes it, the test that checks it against that script).
WRITTEN_BY = {
    "2026-12-01-h200-kit.md": ("scripts/kit_report.py", "tests/harness/test_kit_report.py"),
    "2026-12-04-h200-controlled-runs.md": (
        "scripts/controlled_figures.py",
        "tests/harness/test_controlled_figures.py",
    ),
    "2026-12-04-h200-sweep-log.md": ("scripts/sweep_log_report.py", "tests/harness/test_sweep_log_report.py"),
    "2026-12-06-speed-of-light.md": (
        "registry/management/commands/speed_of_light_report.py",
        "tests/sources/test_everything_that_ships.py",
    ),
    "2026-12-06-h200-h100-kernelbench.md": (
        "scripts/kernelbench_gpu_report.py",
        "tests/sources/kernelbench/test_gpu_report.py",
    ),
    "2026-12-06-h100-blocks.md": ("scripts/blocks_report.py", "tests/harness/test_blocks_report.py"),
    "2026-12-07-kernelbench-compiled-programs.md": (
        "scripts/compile_processes_report.py",
        "tests/sources/kernelbench/test_compiled_programs.py",
    ),
}
# Reports whose raw data was not kept: every figure is in a quoted line of a "Log, DATE:" paragraph.
LOGS = {"2026-12-01-import-timings.md"}


def test_every_report_is_named_by_date_and_is_written_by_a_script_or_is_a_log():
    names = {path.name for path in REPORTS.glob("*.md")}
    assert all(re.match(r"\d{4}-\d{2}-\d{2}-[\w-]+\.md$", name) for name in names), names
    assert names == set(WRITTEN_BY) | LOGS


def test_each_written_report_has_its_script_and_a_test_that_names_it():
    for name, (script, test) in WRITTEN_BY.items():
        assert (ROOT / script).is_file(), script
        assert name in (ROOT / test).read_text(), f"{test} does not name {name}"


def test_a_logs_figures_are_only_in_its_quoted_log_paragraphs():
    for name in LOGS:
        text = (REPORTS / name).read_text()
        body = text.split("\n", 1)[1]  # the title names the date
        for paragraph in body.split("\n\n"):
            if paragraph.lstrip().startswith(">"):
                assert re.match(r"> Log, \d{4}-\d{2}-\d{2}:", paragraph.strip()), paragraph[:80]
                continue
            figures = re.findall(r"\d+(?:[.,]\d+)*\s*(?:s|%|ms|rows|runs|versions)\b", paragraph)
            assert not figures, f"{name}: {figures} outside a quoted log"
        assert "a log, not a result" in text.lower()
