"""Canonical JSON (RFC 8785) and the `sha256:` digests every spec and run is known by."""

import hashlib

import rfc8785

API_VERSION = "kernelindex.dev/v1alpha1"


def canonical_bytes(document) -> bytes:
    return rfc8785.dumps(document)


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
