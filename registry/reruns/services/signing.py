"""Signatures between the web tier and GPU workers (Ed25519, `cryptography`).

A GPU worker is trusted like a rented machine: it may be anyone's. So, in both directions:

- **Jobs** (and the leases the central worker grants) are signed by the web tier with a key derived
  from JOB_SIGNING_KEY. A worker holds only the public half (JOB_VERIFY_KEY): it runs only a spec
  that KernelIndex signed for that job id and GPU model, and could not sign one itself.
- **Reports** (a claim, a heartbeat, a result) are signed by the worker with its own private key
  (WORKER_KEY_FILE, made on its host by `manage.py worker_key generate`); the central worker checks
  them against the public key an operator registered (`registry.reruns.services.worker_keys`).

A worker's report is JSON text with its signature over exactly those bytes, so nothing about
canonical forms of floats (samples, NaN) can make a good report fail or a forged one pass.
"""

import base64
import binascii
import hashlib
import json
import os
import time
from functools import lru_cache

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from registry import digests

PUBLIC_KEY_BYTES = 32


class SignatureRefused(Exception):
    """Why a signed message must not be acted on."""


# --- keys ---------------------------------------------------------------------------------------


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """A public key as operators handle it: base64 of its 32 raw bytes."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def public_key_load(text: str) -> Ed25519PublicKey:
    """The public key written as `public_key_text` writes it; ValueError otherwise."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError, AttributeError) as exc:
        raise ValueError("a public key is the base64 of 32 bytes") from exc
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError(f"a public key is the base64 of 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def private_key_generate() -> tuple[bytes, str]:
    """A new worker key: its PEM (for the worker's key file only) and its public key text."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem, public_key_text(key)


@lru_cache(maxsize=4)
def _job_signing_key(secret: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(
        hashlib.sha256(f"job-signing-ed25519:{secret}".encode()).digest()
    )


def job_signing_key() -> Ed25519PrivateKey:
    if not settings.JOB_SIGNING_KEY:
        raise SignatureRefused("this process holds no job-signing key (a GPU worker signs no jobs)")
    return _job_signing_key(settings.JOB_SIGNING_KEY)


def job_verify_key_text() -> str:
    """The key that verifies jobs and grants: JOB_VERIFY_KEY, or the public half of the signing key."""
    return settings.JOB_VERIFY_KEY or public_key_text(job_signing_key())


@lru_cache(maxsize=4)
def _worker_key(path: str, mtime: float) -> Ed25519PrivateKey:
    with open(path, "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureRefused(f"{path} holds no Ed25519 private key")
    return key


def worker_private_key() -> Ed25519PrivateKey:
    path = settings.WORKER_KEY_FILE
    if not path or not settings.WORKER_NAME:
        raise SignatureRefused("WORKER_NAME and WORKER_KEY_FILE name this worker and its key")
    return private_key_load(path)


def private_key_load(path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file `path`, read again only when the file changes."""
    return _worker_key(str(path), os.stat(path).st_mtime)


def private_key_problem(path) -> str:
    """Why the file `path` holds no private key a worker can sign with, or ""."""
    try:
        private_key_load(path)
    except OSError as exc:
        return f"WORKER_KEY_FILE {path} cannot be read: {exc.strerror or exc}"
    except (ValueError, TypeError, UnsupportedAlgorithm, SignatureRefused):
        return (
            f"WORKER_KEY_FILE {path} holds no unencrypted Ed25519 private key (manage.py worker_key generate)"
        )
    return ""


def worker_key_problem() -> str:
    """Why this process could not sign a report, or "". A GPU worker without a usable key would
    take jobs and have every claim refused, leaving them queued (registry/reruns/worker_startup.py
    refuses to start one)."""
    if not settings.WORKER_NAME or not settings.WORKER_KEY_FILE:
        return "WORKER_NAME and WORKER_KEY_FILE must name this worker and its key (manage.py worker_key)"
    return private_key_problem(settings.WORKER_KEY_FILE)


# --- what the web tier signs: jobs and grants ---------------------------------------------------------


def web_sign(signed: dict) -> dict:
    """`signed` with the web tier's signature over its canonical JSON (RFC 8785)."""
    signature = job_signing_key().sign(digests.canonical_bytes(signed))
    return {"signed": signed, "signature": base64.b64encode(signature).decode()}


def web_check(signed, signature) -> str:
    """Why `signed` was not signed by the web tier, or ""."""
    if not isinstance(signed, dict) or not isinstance(signature, str) or not signature:
        return "the message carries no signed part"
    try:
        verify_key = public_key_load(job_verify_key_text())
        data = digests.canonical_bytes(signed)
        verify_key.verify(base64.b64decode(signature, validate=True), data)
    except (TypeError, ValueError, binascii.Error):
        return "the signed part is not canonical JSON, or the signature is not base64"
    except InvalidSignature:
        return "the signature does not match"
    return ""


def job_message(job) -> dict:
    """The keyword arguments of the job's message: what to run, and the signature over it."""
    from registry.reruns.services.worker import job_spec

    signed = {"job": job.pk, "gpu": job.gpu_slug, "spec": job_spec(job)}
    if job.avoid_gpu_uuid:
        signed["avoid_gpu"] = job.avoid_gpu_uuid  # the card that measured the run (tasks.job_execute)
    return web_sign(signed)


def job_message_check(*, job_id: int, signed, signature) -> str:
    """Why the message must not run, or "" when KernelIndex issued it for `job_id`."""
    if not isinstance(signed, dict) or not isinstance(signature, str) or not signature:
        return "the message carries no signed job spec"
    refusal = web_check(signed, signature)
    if refusal:
        return refusal.replace("the signature does not match", "the signature does not match the job spec")
    if signed.get("job") != job_id:
        return f"the signed spec is for job {signed.get('job')!r}, not job {job_id}"
    if not isinstance(signed.get("gpu"), str) or not isinstance(signed.get("spec"), dict):
        return "the signed part names no GPU model or spec"
    return ""


def grant_check(message, *, job_id: int, worker: str) -> dict:
    """The central worker's answer to this worker's claim of `job_id`, once its signature holds."""
    if not isinstance(message, dict):
        raise SignatureRefused("the claim was answered with no signed grant")
    refusal = web_check(message.get("signed"), message.get("signature"))
    if refusal:
        raise SignatureRefused(f"the grant is refused: {refusal}")
    grant = message["signed"]
    if grant.get("job") != job_id or grant.get("worker") != worker:
        raise SignatureRefused(
            f"the grant is for job {grant.get('job')!r} and worker {grant.get('worker')!r}"
        )
    return grant


# --- what a worker signs: claims, heartbeats, results ---------------------------------------------


def worker_report(kind: str, **fields) -> dict:
    """A report of this worker's, signed with its own key: {"body": JSON text, "signature"}."""
    body = {"kind": kind, "worker": settings.WORKER_NAME, "at": time.time(), **fields}
    text = json.dumps(body, sort_keys=True)
    signature = worker_private_key().sign(text.encode())
    return {"body": text, "signature": base64.b64encode(signature).decode()}


def worker_report_open(message, *, kind: str, public_key_for) -> dict:
    """The body of a worker's report once its signature holds under the key `public_key_for(name)`
    returns (raising SignatureRefused for a worker it does not know)."""
    if not isinstance(message, dict):
        raise SignatureRefused("the report is not a signed message")
    text, signature = message.get("body"), message.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str) or len(text) > REPORT_MAX_CHARS:
        raise SignatureRefused("the report carries no signed body")
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise SignatureRefused("the report's body is not JSON") from exc
    if not isinstance(body, dict) or not isinstance(body.get("worker"), str):
        raise SignatureRefused("the report names no worker")
    public = public_key_for(body["worker"])
    try:
        public_key_load(public).verify(base64.b64decode(signature, validate=True), text.encode())
    except (ValueError, binascii.Error) as exc:
        raise SignatureRefused("the report's signature is not base64") from exc
    except InvalidSignature as exc:
        raise SignatureRefused(f"the report is not signed by worker {body['worker']!r}'s key") from exc
    if body.get("kind") != kind:
        raise SignatureRefused(f"a {body.get('kind')!r} report sent as a {kind!r}")
    return body


# A result with 10,000 samples and a 64 kB log is well under this.
REPORT_MAX_CHARS = 4_000_000
