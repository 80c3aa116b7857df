"""No tracked file holds a development machine's absolute path: commands in docs and scripts are
written from the repository root, so that they work on any clone."""

import pytest

from tests.docs.scan import MACHINE_PATH, offending_lines, offending_lines_with_planted, tracked_text_files


def test_no_tracked_file_holds_a_machine_path():
    assert offending_lines(MACHINE_PATH, tracked_text_files()) == []


@pytest.mark.parametrize(
    "line",
    [
        "    /" + "work/main/.venv/bin/python bench/run.py --quick",
        "results in /" + "work/main/bench/results",
        "KERNELINDEX_VAR_DIR=/" + "tmp/ki-h16/var",
        "before = ba73eeb in /" + "tmp/kp/before",
        "cd /" + "home/alice/kernelindex && make",
    ],
)
def test_a_planted_machine_path_fails(line):
    found = offending_lines_with_planted(MACHINE_PATH, "planted_path.txt", f"planted\n{line}\n")
    assert found == [f"tests/docs/planted_path.txt:2: {line.strip()}"]


@pytest.mark.parametrize(
    "line",
    [
        "https://example.org/work/notes",
        ".venv/bin/python bench/run.py",
        "registry/data/controlled-runs/",
        "a var/bench-h16 folder",
    ],
)
def test_urls_and_relative_paths_pass(line):
    assert not MACHINE_PATH.search(line)
