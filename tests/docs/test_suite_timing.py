"""scripts/suite_timing.py writes the test suite's time to a results file named by date and machine,
which docs/performance.md's "The test suite" is to cite (tests/docs/test_cited_figures.py then checks
each figure against it)."""

import json
import os
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


TWO_TESTS = """
import subprocess, sys

def test_a_child_process_burns_cpu():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

def test_nothing_else():
    assert True
"""


def test_by_module_the_results_hold_each_modules_cpu_own_and_of_its_children(tmp_path):
    """`--by-module` runs the command with scripts/suite_cpu.py and sums its lines by module: a
    module whose test reaped a busy child process has that child's CPU under `children`."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_two.py").write_text(TWO_TESTS)
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:django -n 2 -c {suite / 'pytest.ini'} {suite}"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/suite_timing.py",
            "--by-module",
            "--command",
            command,
            "--results",
            tmp_path,
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},  # not this run's worker
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (written,) = tmp_path.glob("test-suite-*.md")
    result = json.loads(written.with_suffix(".json").read_text())
    (module,) = result["modules"]
    assert module["module"].endswith("test_two.py") and module["tests"] == 2
    assert module["children_cpu_s"] >= 0.05, module
    assert set(result["workers_end_s"]) <= {"gw0", "gw1"}  # the xdist workers', the controller none
    assert "## Where the CPU went" in written.read_text()
