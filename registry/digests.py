"""Canonical JSON (RFC 8785) and the `sha256:` digests every spec and run is known by."""

import hashlib
import json
import re
from functools import lru_cache, partial

import rfc8785

API_VERSION = "kernelindex.dev/v1alpha1"


# Where the C JSON encoder's output can differ from RFC 8785: a float Python writes with ".0" or
# an exponent, an integer beyond 2**53 (16 digits or more), a character whose UTF-16 order differs
# from its code-point order (or a lone surrogate). The tests run on the text, inside strings too,
# so they err towards the exact path, never away from it; each is cheap first (a few microseconds
# on a 3 kB manifest, against 0.4 ms for one combined expression). An exponent is looked for as a
# number token of compact JSON (at the start, or after ":", "," or "["), so that a string such as
# an external id's "eps1e-06" does not send its document down the exact path.
_INTEGRAL_FLOAT = re.compile(r"\.0(?:[,\]}]|$)")
_EXPONENT = re.compile(r"e[-+]")
_MANTISSA = re.compile(r"-?\d+(?:\.\d+)?")
_LONG_INTEGER = re.compile(r"[:,\[]-?\d{16}")
_LONG_INTEGER_ALONE = re.compile(r"-?\d{16}")
_WIDE = re.compile(r"[\ud800-\U0010ffff]")


def _c_encoder_is_canonical(text: str) -> bool:
    if not text.isascii() and _WIDE.search(text):
        return False
    if _INTEGRAL_FLOAT.search(text):
        return False
    for match in _EXPONENT.finditer(text):
        if _is_number_exponent(text, match.start()):
            return False
    return _LONG_INTEGER.search(text) is None and _LONG_INTEGER_ALONE.match(text) is None


def _is_number_exponent(text: str, at: int) -> bool:
    """Whether the "e" at `at` ends the mantissa of a number token: digits (a sign, a fraction)
    back to the start of the text or to a ":", "," or "[" before them."""
    start = at
    while start and text[start - 1] in "0123456789.-":
        start -= 1
    return (start == 0 or text[start - 1] in ":,[") and _MANTISSA.fullmatch(text, start, at) is not None


def canonical_bytes(document) -> bytes:
    """RFC 8785 bytes of `document`.

    For JSON whose floats print alike in Python and ECMAScript (no exponent, not integral) and
    whose keys sort alike by UTF-16 code unit and by code point, RFC 8785 is exactly the C
    encoder's compact, key-sorted, unescaped output (`rfc8785` itself prints floats with `str()`
    and escapes strings as `json` does). Where the text shows anything else, the document is
    assembled by the RFC's structural rules from its members, each taking the same test, down to
    the scalars, which `rfc8785` prints. A run's import computes three digests; this keeps them
    in C for nearly every row (docs/performance.md has the figures)."""
    return canonical_bytes_and_plain(document)[0]


def canonical_bytes_and_plain(document) -> tuple[bytes, bool]:
    """`canonical_bytes(document)`, and whether they are also the C encoder's own text
    (`plain_json`), which can then be stored as the document's JSON as it is. RFC 8785 orders an
    object's members by key alone, so a member's bytes do not depend on its neighbours: a caller
    may serialise the members of a document apart and put the bytes together (the Liger
    importer's manifests), and the whole is plain where every part is."""
    if type(document) is str:
        # RFC 8785 escapes a string as json does; only characters beyond the BMP's low range
        # (surrogates) sort or escape otherwise. No other test applies to a string's text.
        text = json.encoder.encode_basestring(document)
        if text.isascii() or not _WIDE.search(text):
            return text.encode("utf-8"), True
        return _scalar_bytes(document), False
    try:
        text = plain_json(document)
    except (TypeError, ValueError):
        return rfc8785.dumps(document), False  # the reference serialiser raises its precise error
    if _c_encoder_is_canonical(text):
        return text.encode("utf-8"), True
    if isinstance(document, dict):
        if not all(isinstance(key, str) for key in document):
            return rfc8785.dumps(document), False  # which refuses it, as RFC 8785 does
        members = sorted(document.items(), key=lambda item: item[0].encode("utf-16-be"))
        return (
            b"{"
            + b",".join(_scalar_bytes(k) + b":" + canonical_bytes_and_plain(v)[0] for k, v in members)
            + b"}",
            False,
        )
    if isinstance(document, list | tuple):
        return b"[" + b",".join(canonical_bytes_and_plain(v)[0] for v in document) + b"]", False
    return _scalar_bytes(document), False


def _not_serialisable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_encoder(*, ensure_ascii: bool, separators: tuple[str, str], sort_keys: bool, allow_nan: bool):
    """`json.dumps` with these arguments, as a function. json.dumps builds its C encoder on every
    call, which costs more than encoding a small document (a run's results or labels); this one
    is built once. Without the check for circular references: a document parsed from text, or
    built of dicts and lists as ours are, has none (one that had would recurse until Python stops
    it, where json.dumps raises ValueError)."""
    make = json.encoder.c_make_encoder
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    if make is None:  # no C accelerator: json.dumps itself
        return partial(
            json.dumps,
            ensure_ascii=ensure_ascii,
            separators=separators,
            sort_keys=sort_keys,
            allow_nan=allow_nan,
        )
    item_separator, key_separator = separators
    encoder = make(
        None, _not_serialisable, strings, None, key_separator, item_separator, sort_keys, False, allow_nan
    )

    def dumps(document) -> str:
        if type(document) is str:
            return strings(document)
        return "".join(encoder(document, 0))

    return dumps


_plain_encoder = json_encoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def plain_json(document) -> str:
    """The C encoder's compact, key-sorted, unescaped text of `document`."""
    return _plain_encoder(document)


@lru_cache(maxsize=65536, typed=True)  # typed: True, 1 and 1.0 are different JSON
def _scalar_bytes(value) -> bytes:
    return rfc8785.dumps(value)


def digest(document) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()


def digest_of_strings(values: list[str]) -> str:
    """`digest(values)` for a list of strings, without the checks for numbers and key order a
    list of strings cannot need: RFC 8785 escapes strings as `json` does, so only characters
    beyond the BMP's low range (surrogates) are left to the full path."""
    text = "[" + ",".join(map(json.encoder.encode_basestring, values)) + "]"  # json.dumps's text
    if not text.isascii() and _WIDE.search(text):
        return digest(values)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def comparison_key(
    *, kernel: str, operation_mode: str, metric: str, workload_digest: str, family: str, gpu: str
) -> str:
    """Runs that share this key are comparable with each other and form one group."""
    return digest(
        {
            "kernel": kernel,
            "operationMode": operation_mode,
            "metric": metric,
            "workload": workload_digest,
            "comparabilityFamily": family,
            "gpu": gpu,
        }
    )


def median_results(run: dict) -> dict:
    """A run's `results` as a median-based protocol states them: the median, p20 and p80, and the
    source's own metrics as it named them."""
    return {
        "median": run["median"],
        "p20": run["p20"],
        "p80": run["p80"],
        "sourceMetrics": run["source_metrics"],
    }


def protocol_row(spec: dict, *, slug: str, statistic: str = "") -> dict:
    """A Protocol row's fields (all but its digest) from its spec document, the manifest's
    `protocol` section; `statistic` where the row states another than the spec's own."""
    return {
        "slug": slug,
        "name": spec["name"],
        "harness": spec["harness"],
        "harness_repository": spec["harnessRepository"],
        "timer": spec["timer"],
        "statistic": statistic or spec["statistic"],
        "comparability_family": spec["comparabilityFamily"],
        "notes": spec["notes"],
        "spec": spec,
    }


def run_manifest(*, run, kernel, source, implementation, workload, protocol, environment, results) -> dict:
    """A run's canonical manifest, the same for every source; its digest is the run's digest.
    `implementation`, `workload`, `protocol`: (spec, digest); `environment`: (spec, digest, name);
    `results`: what the run states as measured, in its protocol's terms. Evidence level and
    withdrawal are deliberately outside it: they change, a digest never does."""
    implementation_spec, implementation_digest = implementation
    workload_spec, workload_digest = workload
    protocol_spec, protocol_digest = protocol
    environment_spec, environment_digest, environment_name = environment
    return {
        "apiVersion": API_VERSION,
        "kind": "RunManifest",
        "items": [
            {
                "apiVersion": API_VERSION,
                "kind": "BenchmarkRun",
                "metadata": {
                    "externalId": run["external_id"],
                    "source": {"name": source["name"], "url": source["url"], "license": source["license"]},
                    "observedAt": run["observed_at"].strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "labels": run["labels"],
                },
                "spec": {
                    "kernel": kernel,
                    "implementation": {**implementation_spec, "digest": implementation_digest},
                    "workload": {**workload_spec, "digest": workload_digest},
                    "operationMode": run["operation_mode"],
                    "metric": run["metric"],
                    "unit": run["unit"],
                    "results": results,
                    "correctness": {"status": run["source_status"], "note": run["correctness_note"]},
                    "protocolRef": protocol_digest,
                    "environmentRef": environment_digest,
                    "comparisonKey": run["comparison_key"],
                },
            },
            {
                "apiVersion": API_VERSION,
                "kind": "BenchmarkProtocol",
                "metadata": {"name": protocol_spec["name"], "digest": protocol_digest},
                "spec": protocol_spec,
            },
            {
                "apiVersion": API_VERSION,
                "kind": "ExecutionEnvironment",
                "metadata": {"name": environment_name, "digest": environment_digest},
                "spec": environment_spec,
            },
        ],
    }


def environment_spec(gpu_name: str, gpus: dict, *, software: dict | None = None) -> dict:
    """A GPU's environment spec document, as a source's catalog `gpus` knows it (name →
    vendor, product, form factor, architecture; an unknown name stands for itself). Sources record
    no CUDA, driver or torch versions; a controlled run passes the `software` its harness captured."""
    vendor, product, form_factor, architecture = gpus.get(gpu_name, (gpu_name.split()[0], gpu_name, "", ""))
    return {
        "gpu": {"name": gpu_name},
        "vendor": vendor,
        "product": product,
        "formFactor": form_factor,
        "architecture": architecture,
        "software": software or {},
    }
