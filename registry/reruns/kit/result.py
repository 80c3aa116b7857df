"""The result file a contributor's `kernelindex-repro` writes and the site checks on arrival.

Standard library only: the kit carries this module as `kernelindex_kit.result` and the site imports
it from here, so both compute the file's digest the same way and know the same fields.
"""

import hashlib
import json

FORMAT = "kernelindex-reproduction/v1"
SPEC_FORMAT = "kernelindex-spec/v1"

# Every field of the file; the site refuses a file with any other (docs/reproduce.md).
FIELDS = {
    "format": "the format's name and version, FORMAT",
    "run": "the run's id and page URL, as the spec gave them",
    "specDigest": "the digest of the spec the kit ran, as the site served it",
    "spec": "that spec, as the site served it",
    "device": "cpu or cuda: the device the kit timed on",
    "unit": "ms (latency) or MB (peak memory)",
    "samples": "every sample the protocol took, in order",
    "upstream": "upstream's own do_bench figures (median, p20, p80), taken before the samples",
    "sampling": "the timing loop's own record: why it stopped, the precision reached, seconds spent",
    "environment": "the captured software and hardware versions",
    "gpuUuid": "the UUID of the card that ran it (empty on a CPU)",
    "gpuState": "the GPU's clocks, temperature, power and throttle reasons, read while each block was timed (NVML)",
    "kit": "the kit's version and the harness it carries",
    "startedAt": "UTC time the run started (ISO 8601)",
    "finishedAt": "UTC time the run finished (ISO 8601)",
    "digest": "sha256 of the file's own content, every other field (content_digest)",
}
ENVIRONMENT_FIELDS = (
    "gpu_name",
    "gpu_slug",
    "cpu",
    "cpu_threads",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "triton",
    "liger_kernel",
    "transformers",
    "python",
    "host",
)


def canonical(document) -> bytes:
    """Sorted keys, no whitespace, no NaN: Python's own float repr round-trips, so a file read
    and written again gives the same bytes."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def content_digest(document: dict) -> str:
    """The file's digest: sha256 of the canonical bytes of every field but `digest` itself."""
    body = {key: value for key, value in document.items() if key != "digest"}
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()
