"""GPU worker keys, and what the central worker does with a worker's signed reports.

A GPU worker holds no database credential. It claims a job, keeps its attempt alive and hands in
its result as reports signed with its own Ed25519 key, sent through the broker to the central
(default-queue) worker, which checks them here before it writes anything:

- the key is registered (`worker_key_register`, by an operator) and not revoked;
- the key's GPU model is the job's (a worker takes only its own model's jobs);
- the card a report names is one registered for that key (else the claim or the result is refused:
  nothing is written, the refusal is logged, and the job goes to another attempt);
- the job id and lease are the ones the central worker granted to that worker: the lease is made
  here at the claim, and a result counts only for the worker the attempt was granted to.
"""

import logging
import re
import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from registry.reruns.services import signing
from registry.reruns.services.record import rerun_record_result
from registry.reruns.services.worker import CPU_SLUG, job_claim, job_heartbeat

logger = logging.getLogger(__name__)
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")
CARD = re.compile(r"^GPU-[0-9a-fA-F-]{8,60}$")


def _model():
    from registry.reruns.models import WorkerKey

    return WorkerKey


# --- the operator's side ----------------------------------------------------------------------


@transaction.atomic
def worker_key_register(*, name: str, gpu_slug: str, public_key: str, cards: list[str], note: str = ""):
    """Register a worker's public key for one GPU model and the cards (NVML UUIDs) it may report."""
    errors = {}
    if not NAME.match(name or ""):
        errors["name"] = "a worker name is lower-case letters, digits and dashes"
    if not NAME.match(gpu_slug or ""):
        errors["gpu_slug"] = "a GPU model slug, as the queue names it (nvidia-h200, cpu)"
    try:
        signing.public_key_load(public_key or "")
    except ValueError as exc:
        errors["public_key"] = str(exc)
    bad = [card for card in cards if not CARD.match(card)]
    if bad:
        errors["cards"] = f"not an NVML UUID (GPU-…): {', '.join(bad)}"
    if not cards and gpu_slug != CPU_SLUG:
        errors["cards"] = "a GPU worker is registered with the cards it may report"
    WorkerKey = _model()
    if WorkerKey.objects.filter(name=name).exists():
        errors["name"] = f"a worker key named {name} exists (rotate under a new name)"
    if WorkerKey.objects.filter(public_key=(public_key or "").strip()).exists():
        errors["public_key"] = "this public key is registered already"
    if errors:
        raise ValidationError(errors)
    return WorkerKey.objects.create(
        name=name, gpu_slug=gpu_slug, public_key=public_key.strip(), cards=sorted(set(cards)), note=note[:200]
    )


@transaction.atomic
def worker_key_revoke(*, name: str) -> bool:
    """Revoke a key: from now on nothing it signs is taken (its running attempt's result included)."""
    return _model().objects.filter(name=name, revoked_at__isnull=True).update(revoked_at=timezone.now()) == 1


# --- the central worker's side ------------------------------------------------------------------


def _active_key(name: str):
    key = _model().objects.filter(name=name).first()
    if key is None:
        raise signing.SignatureRefused(f"no worker key is registered as {name!r}")
    if key.revoked_at is not None:
        raise signing.SignatureRefused(f"worker key {name!r} was revoked")
    return key


def report_open(message, *, kind: str):
    """(the worker's key, the report's body) once the signature holds; SignatureRefused else."""
    found = {}

    def public_key_for(name):
        found["key"] = _active_key(name)
        return found["key"].public_key

    body = signing.worker_report_open(message, kind=kind, public_key_for=public_key_for)
    if not isinstance(body.get("job"), int) or isinstance(body.get("job"), bool):
        raise signing.SignatureRefused("the report names no job")
    return found["key"], body


def card_refusal(key, card: str) -> str:
    """Why `card` may not report for `key`, or ""."""
    if card in key.cards or (key.gpu_slug == CPU_SLUG and card == ""):
        return ""
    return f"card {card or '(none)'} is not registered for worker key {key.name!r}"


def worker_claim(message) -> dict:
    """A signed claim of a queued (or lost) job: the signed grant, with the lease when it was granted."""
    try:
        key, body = report_open(message, kind="claim")
        card = str(body.get("card") or "")
        age = time.time() - float(body.get("at") or 0)
        if age > settings.JOB_CLAIM_WAIT:
            raise signing.SignatureRefused(f"the claim is {age:.0f} s old: its worker gave up waiting")
        refusal = card_refusal(key, card)
        if refusal:
            raise signing.SignatureRefused(refusal)
    except signing.SignatureRefused as exc:
        logger.error("Claim refused: %s", exc)
        return {"refused": str(exc)}
    claim = job_claim(job_id=body["job"], gpu_slug=key.gpu_slug, worker_host=key.name, gpu_uuid=card)
    grant = {"job": body["job"], "worker": key.name, "outcome": claim.outcome, "lease": claim.lease}
    grant.update({"spec": claim.spec, "queue": claim.queue})
    return signing.web_sign(grant)


def worker_heartbeat(message) -> bool:
    """A signed heartbeat of the attempt this worker was granted."""
    try:
        key, body = report_open(message, kind="heartbeat")
    except signing.SignatureRefused as exc:
        logger.error("Heartbeat refused: %s", exc)
        return False
    return job_heartbeat(job_id=body["job"], lease=str(body.get("lease") or ""), worker=key.name)


def worker_result_record(message):
    """Record a signed result, once it holds for the attempt granted to its worker; None otherwise."""
    try:
        key, body = report_open(message, kind="result")
        if not isinstance(body.get("result"), dict):
            raise signing.SignatureRefused("the report carries no result")
    except signing.SignatureRefused as exc:
        logger.error("Result refused: %s", exc)
        return None
    return rerun_record_result(
        job_id=body["job"], lease=str(body.get("lease") or ""), result=body["result"], worker_key=key
    )
