"""Canonical JSON (RFC 8785) and the `sha256:` digests every spec and run is known by."""

import hashlib
import json
from functools import lru_cache

import rfc8785

API_VERSION = "kernelindex.dev/v1alpha1"


def canonical_bytes(document) -> bytes:
    """RFC 8785 bytes of `document`.

    Run manifests repeat large subtrees (protocol, environment, workload) thousands of times in
    one import, and the pure-Python serialiser is the import's bottleneck. So the top levels are
    assembled here by the RFC's structural rules (no whitespace, keys in UTF-16 code-unit order)
    and each subtree below them is serialised by `rfc8785` once per distinct value."""
    return _compose(document, _COMPOSED_LEVELS)


_COMPOSED_LEVELS = 4


def _compose(value, levels: int) -> bytes:
    if levels and isinstance(value, dict):
        members = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
        return b"{" + b",".join(_scalar_bytes(k) + b":" + _compose(v, levels - 1) for k, v in members) + b"}"
    if levels and isinstance(value, list):
        return b"[" + b",".join(_compose(v, levels - 1) for v in value) + b"]"
    if isinstance(value, dict | list):
        try:
            text = json.dumps(value, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            return rfc8785.dumps(value)  # let the reference serialiser raise its precise error
        return _subtree_bytes(text)
    return _scalar_bytes(value)


@lru_cache(maxsize=65536, typed=True)  # typed: True, 1 and 1.0 are different JSON
def _scalar_bytes(value) -> bytes:
    return rfc8785.dumps(value)


@lru_cache(maxsize=8192)
def _subtree_bytes(text: str) -> bytes:
    # Equal JSON text means an equal JSON value, so equal canonical bytes.
    return rfc8785.dumps(json.loads(text))


def digest(document) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()


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


def competition_ranks(values: list[float]) -> list[int]:
    """Rank 1 is the lowest value; equal values share a rank and leave a gap ("1, 1, 3")."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for position, index in enumerate(order):
        if position and values[index] == values[order[position - 1]]:
            ranks[index] = ranks[order[position - 1]]
        else:
            ranks[index] = position + 1
    return ranks
