"""scripts/suite_timing.py writes the test suite's time to a results file named by date and machine,
which docs/performance.md's "The test suite" is to cite (tests/docs/test_cited_figures.py then checks
each figure against it)."""

import json
import subprocess
import sys

from tests.docs.commands import ROOT

# A stand-in for the suite: prints pytest's summary line and exits as a failing run would.
FAKE_SUITE = "import sys; print('== 3 passed, 1 failed in 0.01s =='); sys.exit(1)"


def test_the_results_file_holds_the_command_its_times_and_pytests_summary(tmp_path):
    command = f'{sys.executable} -c "{FAKE_SUITE}"'
    done = subprocess.run(
        [
            sys.executable,
            "scripts/suite_timing.py",
            "--command",
            command,
            "--results",
            tmp_path,
            "--note",
            "quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1  # the suite's own exit status
    (written,) = tmp_path.glob("test-suite-*.md")
    assert written.name.startswith("test-suite-2") and written.stem.endswith(("x86_64", "aarch64", "arm64"))
    result = json.loads(written.with_suffix(".json").read_text())
    assert (result["exit_status"], result["summary"], result["note"]) == (1, "3 passed, 1 failed", "quiet")
    assert result["wall_s"] >= 0 and len(result["load_average_before"]) == 3
    assert "- pytest: 3 passed, 1 failed" in written.read_text()


def test_the_performance_doc_says_where_the_suites_timings_go():
    text = (ROOT / "docs" / "performance.md").read_text()
    section = text[text.index("### The test suite") : text.index("### Steady under sustained load")]
    assert "scripts/suite_timing.py" in section and "bench/results/test-suite-DATE-MACHINE.md" in section
