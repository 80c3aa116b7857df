"""The fast canonical JSON path (registry.digests.canonical_bytes) is byte-for-byte RFC 8785."""

import hashlib
import json
import math
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import generate
from registry import digests
from registry.sources.liger import importer as liger
from registry.sources.liger.services import BUNDLED_LIGER_CSV
from tests.registry.csvdata import bundled_rows, write_csv

# Floats that print differently in Python and ECMAScript, and strings that sort differently by
# UTF-16 code unit and by code point, are what the fast path must notice.
awkward_floats = st.sampled_from(
    [0.0, -0.0, 1.0, -144.0, 1e-7, 1.5e-5, 1e16, 1.5e17, 1e21, 123456789012345680.0, 5e-324]
)
floats = st.floats(allow_nan=False, allow_infinity=False) | awkward_floats
ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1) | st.sampled_from(
    [2**53 - 1, 10**15, -(10**15)]
)
texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["\ue000", "\U0001f600", "a\x00b", "tab\there", '"quoted"\\', "v1.0]", "1e-5", "\u2028", "\x7f"]
)
scalars = st.none() | st.booleans() | ints | floats | texts
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(texts, children, max_size=5),
    max_leaves=30,
)


class TestCanonicalBytesMatchTheReferenceSerialiser:
    @settings(max_examples=600, deadline=None)
    @given(documents)
    def test_any_json_document_gives_the_reference_bytes(self, document):
        assert digests.canonical_bytes(document) == rfc8785.dumps(document)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(texts, max_size=9))
    def test_a_list_of_strings_gives_the_reference_digest(self, values):
        # the upstream key of every row, hashed without the general checks
        assert (
            digests.digest_of_strings(values) == "sha256:" + hashlib.sha256(rfc8785.dumps(values)).hexdigest()
        )

    @pytest.mark.parametrize("value", [0.0, -0.0, 8378.0, 1e-7, 1e16, 1e21, 2**53 - 1, "\U0001f600"])
    def test_values_python_prints_differently_are_still_canonical(self, value):
        document = {"results": {"median": value, "\ue000": 1, "\U0001f600": [value]}}
        assert digests.canonical_bytes(document) == rfc8785.dumps(document)

    def test_every_bundled_manifest_gives_the_reference_digest(self):
        rows = liger.parse_file(BUNDLED_LIGER_CSV.read_bytes())
        for row in rows:
            manifest = row.run["manifest"]
            assert row.run["digest"] == "sha256:" + hashlib.sha256(rfc8785.dumps(manifest)).hexdigest()

    @pytest.mark.parametrize("text", ["eps1e-06", "1e-5", "k:1e-05", "a,2.5e+3", "[3e-7", "-1e-8", "e-1"])
    def test_an_exponent_in_a_string_is_told_from_one_in_a_number(self, text):
        for document in ({"id": text}, [text, 1e-7], {"id": text, "eps": 1e-06}, {"id": [1, text]}):
            assert digests.canonical_bytes(document) == rfc8785.dumps(document)

    def test_an_external_id_that_looks_like_an_exponent_keeps_the_fast_path(self):
        # Liger's external ids and workload slugs hold "eps1e-06": a string, not a number
        assert digests.canonical_bytes_and_plain({"externalId": "rms_norm/eps1e-06-hidden512"})[1]
        assert not digests.canonical_bytes_and_plain({"eps": 1e-06})[1]

    @pytest.mark.parametrize("document", [{"x": math.nan}, {"x": math.inf}, {"x": 2**53}, {"x": object()}])
    def test_what_rfc_8785_refuses_is_still_refused(self, document):
        with pytest.raises(rfc8785.CanonicalizationError):
            digests.canonical_bytes(document)


class TestManifestsAssembledFromSharedParts:
    """The importer serialises each shared spec document once per file and assembles the
    manifest's canonical bytes around it (liger._manifest_canonical)."""

    def test_every_synthetic_manifest_gives_the_reference_digest_and_json(self, tmp_path):
        path = generate.write_csv(tmp_path / "synthetic.csv", 1500)  # incl. exponents, e.g. eps1e-06
        rows = liger.parse_file(path.read_bytes())
        for row in rows:
            reference = rfc8785.dumps(row.run["manifest"])
            assert row.run["digest"] == "sha256:" + hashlib.sha256(reference).hexdigest()
            if row.manifest_json is not None:
                assert row.manifest_json == digests.plain_json(row.run["manifest"])
        assert sum(row.manifest_json is not None for row in rows) > len(rows) / 2

    def test_a_config_value_that_looks_like_a_placeholder_changes_nothing(self, tmp_path):
        rows = bundled_rows("geglu")[:2]
        config = json.loads(rows[0]["extra_benchmark_config_str"])
        config.update({"note": "\x00workload\x00", "\x00protocol\x00": 1.0})
        rows[0] = dict(rows[0], extra_benchmark_config_str=json.dumps(config))
        for row in liger.parse_file(Path(write_csv(tmp_path / "odd.csv", rows)).read_bytes()):
            reference = rfc8785.dumps(row.run["manifest"])
            assert row.run["digest"] == "sha256:" + hashlib.sha256(reference).hexdigest()
