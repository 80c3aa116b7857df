"""Random and mutated CSV input: always a clean import or a clear error, never a traceback,
never a partial write."""

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.models import BenchmarkRun, Kernel, SourceImport, Workload
from registry.services import ImportRejected
from registry.sources.liger.importer import COLUMNS
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows

pytestmark = pytest.mark.django_db

SEED_ROWS = bundled_rows("geglu")[:6] + bundled_rows("rms_norm")[:4]


def to_bytes(rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode()


def counts():
    return (
        BenchmarkRun.objects.count(),
        SourceImport.objects.count(),
        Workload.objects.count(),
        Kernel.objects.count(),
    )


def import_or_refuse(tmp_path, data: bytes):
    path = tmp_path / "fuzz.csv"
    path.write_bytes(data)
    before = counts()
    try:
        summary = liger_import(path=path)
    except ImportRejected as exc:
        assert str(exc).startswith("fuzz.csv: ")
        assert counts() == before, "a refused import wrote something"
        return None
    assert summary.created + summary.unchanged == summary.rows
    return summary


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
cell = st.text(max_size=12) | st.sampled_from(
    ["", "nan", "inf", "-1", "1e309", "{}", "[]", "null", '{"dtype": "torch.int4"}', "torch.float32", "0"]
)


class TestMutatedRows:
    @FUZZ
    @given(row=st.integers(0, len(SEED_ROWS) - 1), column=st.sampled_from(COLUMNS), value=cell)
    def test_one_mutated_cell(self, tmp_path, row, column, value):
        rows = [dict(r) for r in SEED_ROWS]
        rows[row][column] = value
        outcome = import_or_refuse(tmp_path, to_bytes(rows))
        assert outcome is None or outcome.rows == len(rows)

    @FUZZ
    @given(cut=st.integers(0, 2000), junk=st.binary(max_size=8))
    def test_bytes_cut_and_spliced(self, tmp_path, cut, junk):
        data = to_bytes(SEED_ROWS)
        outcome = import_or_refuse(tmp_path, data[:cut] + junk + data[cut + len(junk) :])
        assert outcome is None or outcome.rows >= 1

    @FUZZ
    @given(data=st.binary(max_size=300))
    def test_random_bytes(self, tmp_path, data):
        assert import_or_refuse(tmp_path, data) is None
