"""A refused file is named as the user typed it, with the line and the column of the problem,
whatever kind of file it is (binary, Latin-1, ragged)."""

import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db


@pytest.fixture
def typed(tmp_path, monkeypatch):
    """A CSV in a sub-folder of the working directory, and the relative path a user would type."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("data")
    path = "data/bench.csv"
    write_csv(tmp_path / path, bundled_rows()[:3])
    return path


def refusal(path) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("import_liger", path)
    return str(refused.value)


def third_line_with(path, old: bytes, new: bytes) -> int:
    """Replace `old` on line 3 by `new`; returns the 1-based column where `new` starts."""
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    column = lines[2].index(old) + 1
    lines[2] = lines[2].replace(old, new, 1)
    with open(path, "wb") as handle:
        handle.write(b"\n".join(lines))
    return column


class TestRefusalsNameThePathLineAndColumn:
    def test_a_latin1_byte(self, typed):
        column = third_line_with(typed, b"liger", b"lig\xe9r") + 3

        assert f"data/bench.csv: line 3, column {column}: not UTF-8 text (byte 0xe9" in refusal(typed)

    def test_a_binary_file(self, typed):
        column = third_line_with(typed, b"liger", b"lig\x00er") + 3

        assert f"data/bench.csv: line 3, column {column}: a NUL character" in refusal(typed)

    def test_a_row_with_a_field_too_many(self, typed):
        with open(typed, "a", encoding="utf-8") as handle:
            handle.write(",".join(["x"] * 16) + "\r\n")

        assert "data/bench.csv: line 5, column 16: expected 15 fields, found 16" in refusal(typed)

    def test_a_row_with_fields_missing(self, typed):
        with open(typed, "a", encoding="utf-8") as handle:
            handle.write("geglu,liger\r\n")

        assert "data/bench.csv: line 5, column 3: expected 15 fields, found 2" in refusal(typed)

    def test_a_bad_value_names_its_column(self, typed):
        write_csv(Path(typed), [dict(bundled_rows()[0], y_value_50="fast")])

        assert refusal(typed) == (
            "Import refused, nothing was written. "
            "data/bench.csv: line 2, column 'y_value_50': 'fast' is not a number"
        )
