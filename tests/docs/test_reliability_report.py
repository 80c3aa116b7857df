"""docs/reliability.md's figures come from a results file that scripts/reliability_report.py wrote from
the fault tests' `figure()` lines, named by date and machine (tests/docs/test_cited_figures.py checks
each figure against it)."""

import json
import re
import subprocess
import sys

from tests.docs.commands import ROOT
from tests.docs.test_cited_figures import citations
from tests.scripts import load_script

reliability_report = load_script("reliability_report")

LINES = [
    {"figure": "item2.long_job", "value": 3, "at": "2026-12-05 10:00:00"},
    {"figure": "item1.pool_child", "value": 4.5, "at": "2026-12-05 10:01:00"},
    {"figure": "item2.long_job", "value": 1, "visibility_timeout_s": 2, "at": "2026-12-06 09:00:00"},
]


def test_the_latest_entry_of_each_figure_is_kept():
    entries = reliability_report.latest_entries([json.dumps(line) for line in LINES])
    assert [(entry["figure"], entry["value"]) for entry in entries] == [
        ("item1.pool_child", 4.5),
        ("item2.long_job", 1),
    ]


def test_the_results_file_is_named_by_the_latest_date_and_the_machine(tmp_path):
    figures = tmp_path / "reliability-figures.jsonl"
    figures.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    done = subprocess.run(
        [
            sys.executable,
            "scripts/reliability_report.py",
            "--figures",
            figures,
            "--results",
            tmp_path,
            "--note",
            "quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    name = f"reliability-2026-12-06-{reliability_report.machine_name()}"
    text = (tmp_path / f"{name}.md").read_text()
    assert "| item2.long_job | 1 | visibility_timeout_s 2 | 2026-12-06 09:00:00 |" in text
    assert "Conditions: quiet" in text
    assert json.loads((tmp_path / f"{name}.json").read_text())["figures"][1]["value"] == 1


def test_no_figures_is_an_error_not_an_empty_file(tmp_path):
    done = subprocess.run(
        [sys.executable, "scripts/reliability_report.py", "--figures", tmp_path / "none.jsonl"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "run the fault tests first" in done.stderr


def test_the_reliability_doc_cites_a_results_file_the_script_wrote():
    cited = [paths for doc, paths, _ in citations() if doc == "reliability.md"]
    assert cited
    for paths in cited:
        for path in paths:
            assert re.fullmatch(r"bench/results/reliability-\d{4}-\d{2}-\d{2}-[\w-]+\.md", path), path
            assert (ROOT / path).read_text().startswith("# Fault-test figures, ")
            assert (ROOT / path).with_suffix(".json").is_file()
