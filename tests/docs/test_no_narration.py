"""No tracked file narrates the work by numbered periods: measurements are named by date and card."""

import pytest

from tests.docs.scan import NARRATION, offending_lines, offending_lines_with_planted, tracked_text_files


def test_no_tracked_file_narrates_the_work_by_numbered_periods():
    assert offending_lines(NARRATION, tracked_text_files()) == []


# The examples say SITTING where the narrating word stands, so that this file holds no such line;
# each test puts the word back.
NARRATING_EXAMPLES = [
    "The fourteenth SITTING's host reran 183 runs.",
    "in fifteen SITTINGs (2026-12-01 to 2026-12-04)",
    '"""SITTING 11\'s sweep ran liger sparse multi-token attention"""',
    "# the tenth SITTING lost half its GPU time",
    "docs/sweep-log.md tells the sweep SITTING by SITTING",
    "measured until the fourth sweep SITTING, 2026-12-01",
    "The twelfth" + "'s second host, warm after its first jobs",
]


def _narrating(example: str) -> str:
    return example.replace("SITTING", "sess" + "ion")


@pytest.mark.parametrize("example", NARRATING_EXAMPLES)
def test_a_planted_narrating_line_fails(tmp_path, example):
    line = _narrating(example)
    found = offending_lines_with_planted(NARRATION, "planted_narration.md", f"# Planted\n\n{line}\n")
    assert found == [f"tests/docs/planted_narration.md:3: {line}"]


@pytest.mark.parametrize(
    "line",
    [
        "On 2026-12-04 GPU-dc22f303 reran 183 runs.",
        "Sessions are stored in the database (django.contrib.sessions).",
        "the first call, at that T, picks the config every point then uses",
        "the sweep runs in a process session of its own (setsid)",
    ],
)
def test_ordinary_words_about_sessions_and_calls_pass(line):
    assert not NARRATION.search(line)
