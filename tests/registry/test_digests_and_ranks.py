"""Digests are stable for the same input and change with any spec; ranks share ties."""

import json

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from registry import digests
from registry.competition_ranks import competition_ranks
from registry.models import BenchmarkRun
from registry.services import groups_rerank
from registry.sources.liger.importer import parse_file
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows, write_csv


def parse(tmp_path, rows):
    return parse_file(open(write_csv(tmp_path / "f.csv", rows), "rb").read())


class TestDigests:
    def test_digest_is_sha256_of_rfc8785_bytes(self):
        assert digests.digest({"b": 1, "a": [1.0, "x"]}) == digests.digest({"a": [1, "x"], "b": 1})
        assert rfc8785.dumps({"b": 1, "a": 2}) == b'{"a":2,"b":1}'
        assert digests.digest({}) == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

    def test_same_input_gives_the_same_digests(self, tmp_path):
        rows = bundled_rows("geglu")
        first, second = parse(tmp_path, rows), parse(tmp_path, list(rows))
        assert [r.run["digest"] for r in first] == [r.run["digest"] for r in second]
        assert [r.workload["digest"] for r in first] == [r.workload["digest"] for r in second]

    @pytest.mark.parametrize(
        ("column", "value", "changes"),
        [
            (
                "extra_benchmark_config_str",
                '{"bsz": 4, "hidden_size": 4096, "intermediate_size": 11008, "hidden_act": "gelu_pytorch_tanh", "dtype": "torch.bfloat16"}',
                {"workload"},
            ),
            (
                "extra_benchmark_config_str",
                '{"bsz": 8, "hidden_size": 4096, "intermediate_size": 11008, "hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float16"}',
                {"workload"},
            ),
            ("gpu_name", "NVIDIA H100 80GB HBM3", {"environment"}),
            ("metric_name", "memory", {"protocol"}),
            ("liger_version", "0.9.9", set()),
            ("y_value_50", "1.5", set()),
        ],
    )
    def test_any_spec_change_gives_new_digests(self, tmp_path, column, value, changes):
        row = next(r for r in bundled_rows("geglu") if r["kernel_provider"] == "liger")
        changed = dict(row, **{column: value})
        if column == "y_value_50":  # a new median keeps the quantiles in order
            changed.update(y_value_20=value, y_value_80=value)
        if column == "metric_name":
            changed["metric_unit"] = "MB"
        before, after = parse(tmp_path, [row])[0], parse(tmp_path, [changed])[0]
        assert before.run["digest"] != after.run["digest"]
        for spec in ("workload", "environment", "protocol"):
            differs = getattr(before, spec)["digest"] != getattr(after, spec)["digest"]
            assert differs == (spec in changes), spec
        if changes:
            assert before.run["comparison_key"] != after.run["comparison_key"]

    def test_comparison_key_ignores_the_implementation(self, tmp_path):
        rows = [
            r
            for r in bundled_rows("geglu")
            if r["x_value"] == "8192"
            and r["kernel_operation_mode"] == "backward"
            and r["metric_name"] == "speed"
        ]
        keys = {r.run["comparison_key"] for r in parse(tmp_path, rows)}
        assert len(rows) == 2 and len(keys) == 1

    @given(
        st.dictionaries(
            st.text(max_size=5), st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=5), max_size=5
        )
    )
    def test_digest_does_not_depend_on_key_order(self, document):
        reordered = dict(reversed(list(document.items())))
        assert digests.digest(document) == digests.digest(reordered)
        assert json.loads(digests.canonical_bytes(document)) == document


class TestRanks:
    @pytest.mark.parametrize(
        ("values", "ranks"),
        [
            ([3.0, 1.0, 2.0], [3, 1, 2]),
            ([1.0, 1.0, 2.0], [1, 1, 3]),
            ([2.0, 1.0, 1.0, 1.0], [4, 1, 1, 1]),
            ([5.0], [1]),
            ([], []),
        ],
    )
    def test_competition_ranks_share_ties(self, values, ranks):
        assert competition_ranks(values) == ranks

    @pytest.mark.django_db
    def test_equal_medians_share_a_rank_in_the_database(self, tmp_path):
        rows = [
            r
            for r in bundled_rows("geglu")
            if r["x_value"] == "8192"
            and r["kernel_operation_mode"] == "forward"
            and r["metric_name"] == "speed"
        ]
        tied = [dict(r, y_value_20="10.0", y_value_50="10.0", y_value_80="10.0") for r in rows]
        liger_import(path=write_csv(tmp_path / "t.csv", tied))
        assert sorted(BenchmarkRun.objects.values_list("rank", "group_size")) == [(1, 2), (1, 2)]

    @pytest.mark.django_db
    def test_rerank_after_a_value_changes(self, tmp_path):
        rows = [r for r in bundled_rows("geglu") if r["x_value"] == "8192" and r["metric_name"] == "speed"]
        liger_import(path=write_csv(tmp_path / "t.csv", rows))
        worst = BenchmarkRun.objects.filter(operation_mode="full").order_by("-median").first()
        BenchmarkRun.objects.filter(pk=worst.pk).update(p20=0.001, median=0.001)
        groups_rerank(keys=[worst.comparison_key])
        worst.refresh_from_db()
        assert (worst.rank, worst.group_size) == (1, 2)


class TestComposedCanonicalisation:
    """digests.canonical_bytes assembles the top levels itself; it must equal rfc8785 exactly."""

    def test_every_bundled_manifest_matches_the_reference_serialiser(self):
        from registry.sources.liger.services import BUNDLED_LIGER_CSV

        for row in parse_file(BUNDLED_LIGER_CSV.read_bytes()):
            assert digests.canonical_bytes(row.run["manifest"]) == rfc8785.dumps(row.run["manifest"])

    @given(
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**53) + 1, 2**53 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda children: st.lists(children, max_size=4)
            | st.dictionaries(st.text(), children, max_size=4),
            max_leaves=30,
        )
    )
    def test_any_document_matches_the_reference_serialiser(self, document):
        assert digests.canonical_bytes(document) == rfc8785.dumps(document)
