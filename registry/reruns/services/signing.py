"""Signed job messages. A GPU worker is less trusted than the web tier and the broker may be
reachable from many sites: the worker runs only a spec that carries KernelIndex's signature, for
the job id and GPU model it was issued for (an HMAC-SHA256 under JOB_SIGNING_KEY)."""

import hashlib
import hmac

from django.conf import settings

from registry import digests
from registry.models import RerunJob
from registry.reruns.services.worker import job_spec


def job_message(job: RerunJob) -> dict:
    """The keyword arguments of the job's message: what to run, and the signature over it."""
    signed = {"job": job.pk, "gpu": job.gpu_slug, "spec": job_spec(job)}
    if job.avoid_gpu_uuid:
        signed["avoid_gpu"] = job.avoid_gpu_uuid  # the card that measured the run (tasks.job_execute)
    return {"signed": signed, "signature": _signature(signed)}


def job_message_check(*, job_id: int, signed, signature) -> str:
    """Why the message must not run, or "" when KernelIndex issued it for `job_id`."""
    if not isinstance(signed, dict) or not isinstance(signature, str) or not signature:
        return "the message carries no signed job spec"
    try:
        expected = _signature(signed)
    except (TypeError, ValueError):
        return "the signed part is not canonical JSON"
    if not hmac.compare_digest(expected, signature):
        return "the signature does not match the job spec"
    if signed.get("job") != job_id:
        return f"the signed spec is for job {signed.get('job')!r}, not job {job_id}"
    if not isinstance(signed.get("gpu"), str) or not isinstance(signed.get("spec"), dict):
        return "the signed part names no GPU model or spec"
    return ""


def _signature(signed: dict) -> str:
    key = settings.JOB_SIGNING_KEY.encode()
    return hmac.new(key, digests.canonical_bytes(signed), hashlib.sha256).hexdigest()
