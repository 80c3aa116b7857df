"""The Liger importer: idempotence, upstream updates, withdrawal, and refusal of bad input."""

import pytest
from django.core.management import CommandError, call_command

from registry.models import BenchmarkRun, SourceImport, Workload
from registry.services import ImportRejected
from registry.sources.liger import importer as liger
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows, write_csv

ONE_MS = {"y_value_20": "1.0", "y_value_50": "1.0", "y_value_80": "1.0"}

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    return bundled_rows("geglu")


@pytest.fixture
def first_import(tmp_path, rows):
    path = write_csv(tmp_path / "v1.csv", rows)
    return liger_import(path=path)


def snapshot():
    return dict(BenchmarkRun.objects.values_list("external_id", "digest"))


class TestImportIsIdempotent:
    def test_first_import_creates_one_run_per_row(self, first_import, rows):
        assert first_import.created == len(rows) == BenchmarkRun.objects.count()

    def test_second_import_of_the_same_file_changes_nothing(self, tmp_path, rows, first_import):
        before = snapshot()
        again = liger_import(path=write_csv(tmp_path / "again.csv", rows))
        assert (again.created, again.unchanged, again.superseded, again.withdrawn) == (0, len(rows), 0, 0)
        assert snapshot() == before

    def test_every_import_is_recorded_with_its_counts(self, tmp_path, rows, first_import):
        liger_import(path=write_csv(tmp_path / "again.csv", rows))
        latest, first = SourceImport.objects.order_by("-pk")[:2]
        assert (first.created, first.unchanged) == (len(rows), 0)
        assert (latest.created, latest.unchanged) == (0, len(rows))
        assert latest.file_digest == first.file_digest and latest.file_digest.startswith("sha256:")


class TestReimportSkipsUnchangedRows:
    @pytest.fixture
    def parsed(self, monkeypatch):
        """The rows the importer parses in full (not recognised from the registry)."""
        lines = []
        parse_row = liger._parse_row

        def counting(line, *args, **kwargs):
            lines.append(line)
            return parse_row(line, *args, **kwargs)

        monkeypatch.setattr(liger, "_parse_row", counting)
        return lines

    def test_unchanged_rows_are_not_parsed_again(self, tmp_path, rows, first_import, parsed):
        summary = liger_import(path=write_csv(tmp_path / "again.csv", rows))
        assert (summary.created, summary.unchanged) == (0, len(rows))
        assert parsed == []

    def test_a_row_written_differently_is_parsed_and_still_unchanged(
        self, tmp_path, rows, first_import, parsed
    ):
        before = snapshot()
        respelled = dict(rows[2], x_value=rows[2]["x_value"] + ".0", metric_unit=" ms ")
        summary = liger_import(path=write_csv(tmp_path / "again.csv", rows[:2] + [respelled] + rows[3:]))
        assert (summary.created, summary.unchanged) == (0, len(rows))
        assert parsed == [4]  # the header is line 1
        assert snapshot() == before

    def test_only_new_and_changed_rows_are_parsed(self, tmp_path, rows, first_import, parsed):
        replaced = dict(rows[0], timestamp="2025-01-01 00:00:00", **ONE_MS)
        summary = liger_import(path=write_csv(tmp_path / "v2.csv", [replaced, *rows[1:]]))
        assert (summary.created, summary.superseded, summary.unchanged) == (1, 1, len(rows) - 1)
        assert parsed == [2]


class TestNewerFile:
    def test_replaced_row_becomes_a_new_run_and_the_old_one_is_superseded(self, tmp_path, rows, first_import):
        replaced = dict(rows[0], timestamp="2025-01-01 00:00:00", liger_version="0.9.0", **ONE_MS)
        summary = liger_import(path=write_csv(tmp_path / "v2.csv", [replaced, *rows[1:]]))
        assert (summary.created, summary.superseded, summary.withdrawn) == (1, 1, 0)
        new = BenchmarkRun.objects.get(external_id__endswith="2025-01-01-00-00-00")
        old = BenchmarkRun.objects.get(upstream_key=new.upstream_key, observed_at__year=2024)
        assert old.superseded_by == new
        assert (old.rank, old.group_size) == (None, None)
        assert new.rank is not None and new.labels["liger_version"] == "0.9.0"

    def test_row_no_longer_listed_is_withdrawn_not_deleted(self, tmp_path, rows, first_import):
        dropped = rows[-1]
        summary = liger_import(path=write_csv(tmp_path / "v2.csv", rows[:-1]))
        assert (summary.created, summary.withdrawn, summary.unchanged) == (0, 1, len(rows) - 1)
        assert BenchmarkRun.objects.count() == len(rows)
        withdrawn = BenchmarkRun.objects.get(withdrawn=True)
        assert withdrawn.withdrawn_at is not None
        assert withdrawn.implementation.provider == dropped["kernel_provider"]
        assert withdrawn.rank is None

    def test_withdrawn_row_listed_again_is_restored(self, tmp_path, rows, first_import):
        liger_import(path=write_csv(tmp_path / "v2.csv", rows[:-1]))
        summary = liger_import(path=write_csv(tmp_path / "v3.csv", rows))
        assert summary.restored == 1
        assert not BenchmarkRun.objects.filter(withdrawn=True).exists()
        assert not BenchmarkRun.objects.filter(rank__isnull=True).exists()

    def test_new_rows_are_added_beside_the_old_ones(self, tmp_path, rows, first_import):
        swiglu = bundled_rows("swiglu")
        summary = liger_import(path=write_csv(tmp_path / "v2.csv", rows + swiglu))
        assert (summary.created, summary.unchanged) == (len(swiglu), len(rows))

    def test_changed_values_without_a_new_timestamp_are_refused(self, tmp_path, rows, first_import):
        before = snapshot()
        edited = dict(rows[3], y_value_20="999.0", y_value_50="999.0", y_value_80="999.0")
        with pytest.raises(ImportRejected, match="line 5: run .* already published with other values"):
            liger_import(path=write_csv(tmp_path / "v2.csv", rows[:3] + [edited] + rows[4:]))
        assert snapshot() == before


def malformed(rows, column, value):
    return [rows[0], dict(rows[1], **{column: value}), *rows[2:]]


class TestMalformedInputIsRefusedAndWritesNothing:
    @pytest.mark.parametrize(
        ("column", "value", "message"),
        [
            ("y_value_50", "fast", r"line 3, column 'y_value_50': 'fast' is not a number"),
            ("y_value_20", "nan", r"line 3, column 'y_value_20': 'nan' is not a finite"),
            ("y_value_80", "-1", r"line 3, column 'y_value_80': '-1' is not a finite, non-negative"),
            ("y_value_50", "0", r"line 3, column 'y_value_50': quantiles out of order: y_value_20 "),
            (
                "extra_benchmark_config_str",
                "{bsz: 8",
                r"line 3, column 'extra_benchmark_config_str': invalid JSON",
            ),
            (
                "extra_benchmark_config_str",
                "[1, 2]",
                r"line 3, column 'extra_benchmark_config_str': expected a JSON object",
            ),
            (
                "extra_benchmark_config_str",
                '{"dtype": "torch.bfloat17"}',
                r"line 3, column 'extra_benchmark_config_str': unknown dtype 'torch.bfloat17'",
            ),
            (
                "extra_benchmark_config_str",
                '{"bsz": NaN}',
                r"line 3, column 'extra_benchmark_config_str': 'bsz' is nan",
            ),
            (
                "extra_benchmark_config_str",
                '{"T": 99999999999999999999}',
                r"'T' is 99999999999999999999: numbers must be finite",
            ),
            ("kernel_operation_mode", "sideways", r"line 3, column 'kernel_operation_mode'"),
            ("metric_name", "energy", r"line 3, column 'metric_name'"),
            ("metric_unit", "s", r"line 3, column 'metric_unit': unit 's' does not match"),
            ("timestamp", "yesterday", r"line 3, column 'timestamp'"),
            ("gpu_name", "", r"line 3, column 'gpu_name': empty value"),
        ],
    )
    def test_bad_value_names_line_and_column(self, tmp_path, rows, column, value, message):
        path = write_csv(tmp_path / "bad.csv", malformed(rows, column, value))
        with pytest.raises(ImportRejected, match=message):
            liger_import(path=path)
        assert BenchmarkRun.objects.count() == 0
        assert SourceImport.objects.count() == 0
        assert Workload.objects.count() == 0

    def test_bad_row_after_an_earlier_import_leaves_the_registry_as_it_was(
        self, tmp_path, rows, first_import
    ):
        before = snapshot()
        imports = SourceImport.objects.count()
        swiglu = bundled_rows("swiglu")
        bad = [*rows, *swiglu[:-1], dict(swiglu[-1], y_value_50="oops")]
        with pytest.raises(ImportRejected, match="y_value_50"):
            liger_import(path=write_csv(tmp_path / "bad.csv", bad))
        assert snapshot() == before
        assert SourceImport.objects.count() == imports

    def test_missing_column_is_named(self, tmp_path, rows):
        columns = [c for c in rows[0] if c != "gpu_name"]
        with pytest.raises(ImportRejected, match=r"line 1: missing column\(s\): gpu_name"):
            liger_import(path=write_csv(tmp_path / "bad.csv", rows, columns=columns))
        assert BenchmarkRun.objects.count() == 0

    def test_empty_file_is_refused(self, tmp_path):
        path = tmp_path / "empty.csv"
        path.write_bytes(b"")
        with pytest.raises(ImportRejected, match="line 1: the file is empty"):
            liger_import(path=path)

    def test_header_without_rows_is_refused(self, tmp_path, rows):
        with pytest.raises(ImportRejected, match="no data rows"):
            liger_import(path=write_csv(tmp_path / "header.csv", []))

    def test_wrong_encoding_is_refused_with_its_line(self, tmp_path, rows):
        path = tmp_path / "latin1.csv"
        write_csv(path, rows)
        data = path.read_bytes().replace(b"gelu_pytorch_tanh", b"gelu_pytorch_t\xe4nh", 1)
        path.write_bytes(data)
        with pytest.raises(ImportRejected, match=r"line 2, column \d+: not UTF-8 text \(byte 0xe4"):
            liger_import(path=path)
        assert BenchmarkRun.objects.count() == 0

    def test_nul_character_is_refused_with_its_line(self, tmp_path, rows):
        path = write_csv(tmp_path / "nul.csv", malformed(rows, "kernel_provider", "lig\x00er"))
        with pytest.raises(ImportRejected, match=r"line 3, column \d+: a NUL character"):
            liger_import(path=path)
        assert BenchmarkRun.objects.count() == 0

    def test_short_row_is_refused(self, tmp_path, rows):
        path = tmp_path / "short.csv"
        write_csv(path, rows)
        path.write_text(path.read_text() + "geglu,liger,forward\r\n")
        with pytest.raises(
            ImportRejected, match=rf"line {len(rows) + 2}, column 4: expected 15 fields, found 3"
        ):
            liger_import(path=path)

    def test_duplicate_row_is_refused(self, tmp_path, rows):
        with pytest.raises(ImportRejected, match=r"line 3: duplicate row: same key as line 2"):
            liger_import(path=write_csv(tmp_path / "dup.csv", [rows[0], rows[0]]))

    def test_missing_file_is_refused(self, tmp_path):
        with pytest.raises(ImportRejected, match="cannot read the file"):
            liger_import(path=tmp_path / "nope.csv")


class TestCommand:
    def test_command_prints_the_summary(self, tmp_path, rows, capsys):
        call_command("import_liger", write_csv(tmp_path / "v1.csv", rows))
        out = capsys.readouterr().out
        assert f"{len(rows)} created, 0 unchanged, 0 superseded, 0 withdrawn" in out

    def test_command_fails_with_the_reason(self, tmp_path, rows):
        path = write_csv(tmp_path / "bad.csv", malformed(rows, "x_value", ""))
        with pytest.raises(CommandError, match=r"nothing was written.*line 3, column 'x_value': empty value"):
            call_command("import_liger", path)
