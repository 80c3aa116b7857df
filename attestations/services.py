"""Every change to attestations and issue reports, each in one transaction with its audit entry.

Forms, API views, admin actions and management commands all call these functions, so the rules
(validation, who may decide, which transitions exist) live here once. None of them touches a
run's evidence level: only a KernelIndex-controlled rerun does that.
"""

import hashlib
import json
import math
from collections.abc import Iterable
from decimal import Decimal
from numbers import Real

from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from attestations.audit import audit_record
from attestations.models import (
    LINK_MAX,
    LINKS_MAX,
    REASON_MAX,
    TEXT_MAX,
    VERSION_MAX,
    Attestation,
    AttestationKind,
    AttestationOrigin,
    AttestationState,
    IssueReport,
    IssueReportCategory,
    IssueReportState,
)
from attestations.notifications import MODERATORS_GROUP
from attestations.reproduction_files import result_file_check
from attestations.selectors import filings_changed
from registry.cache import generation_bump
from registry.models import BenchmarkRun, Verdict
from registry.reruns.judgement import judgement_note, run_judgement
from registry.reruns.models import RerunJob
from registry.reruns.services.request import JobRefused, rerun_request
from registry.stats import medians

# Machine accounts (a GPU worker's API token, should one ever be issued) read; they never contribute.
GPU_WORKERS_GROUP = "gpu-workers"
MODERATE_ATTESTATION = "attestations.moderate_attestation"
TRIAGE_REPORT = "attestations.triage_issuereport"

# Decisions a moderator can take. Taking an approved attestation down again is a rejection.
ATTESTATION_TRANSITIONS = {
    AttestationState.APPROVED: {AttestationState.PENDING},
    AttestationState.REJECTED: {AttestationState.PENDING, AttestationState.APPROVED},
}
REPORT_TRANSITIONS = {
    IssueReportState.OPEN: {
        IssueReportState.ACKNOWLEDGED,
        IssueReportState.RESOLVED,
        IssueReportState.DISMISSED,
    },
    IssueReportState.ACKNOWLEDGED: {IssueReportState.RESOLVED, IssueReportState.DISMISSED},
}
REPORT_STATES_NEEDING_RESOLUTION = {IssueReportState.RESOLVED, IssueReportState.DISMISSED}

# The typed version fields, filled from a result file's captured environment.
FILE_VERSION_FIELDS = {
    "driver_version": "driver",
    "cuda_version": "cuda",
    "torch_version": "torch",
    "triton_version": "triton",
    "liger_version": "liger_kernel",
}
VERSION_FIELDS = ["driver_version", "cuda_version", "torch_version", "triton_version", "liger_version"]
REPRODUCTION_FIELDS = ["median", "p20", "p80", "unit", "gpu_product", *VERSION_FIELDS, "harness", "links"]
_http_url = URLValidator(schemes=["http", "https"], message="Enter a full http:// or https:// link.")


class TransitionNotAllowed(Exception):
    """The object is not in a state the requested change can start from (someone else was
    first, or the change does not exist)."""


# --- attestations ---------------------------------------------------------------------------


@transaction.atomic
def attestation_submit(
    *,
    run: BenchmarkRun,
    author: AbstractBaseUser,
    kind: str,
    text: str = "",
    median: float | None = None,
    p20: float | None = None,
    p80: float | None = None,
    unit: str = "",
    gpu_product: str = "",
    driver_version: str = "",
    cuda_version: str = "",
    torch_version: str = "",
    triton_version: str = "",
    liger_version: str = "",
    harness: str = "",
    links: Iterable[str] = (),
) -> Attestation:
    """File a reproduction or a note; it waits, pending, for a moderator."""
    _require_contributor(author)
    fields = attestation_clean(
        run=run,
        kind=kind,
        text=text,
        median=median,
        p20=p20,
        p80=p80,
        unit=unit,
        gpu_product=gpu_product,
        driver_version=driver_version,
        cuda_version=cuda_version,
        torch_version=torch_version,
        triton_version=triton_version,
        liger_version=liger_version,
        harness=harness,
        links=links,
    )
    digest = _content_digest({"run": run.pk, **fields})
    if Attestation.objects.filter(author=author, content_digest=digest).exists():
        raise _duplicate()
    try:
        with transaction.atomic():
            attestation = Attestation.objects.create(run=run, author=author, content_digest=digest, **fields)
    except IntegrityError:  # the same content, submitted twice at once
        raise _duplicate() from None
    filings_changed(user_pk=author.pk)  # their run pages ask for their submissions again
    _audit(
        actor=author,
        target=attestation,
        action="submitted",
        to_state=AttestationState.PENDING,
    )
    return attestation


@transaction.atomic
def reproduction_file_submit(
    *, run: BenchmarkRun, author: AbstractBaseUser, content: bytes, text: str = ""
) -> Attestation:
    """File a reproduction from the kit's result file; it waits, pending, for a moderator.

    The file is checked first (`result_file_check`: its digest, the run's spec digest, the
    samples) and a refused file stores nothing. The figures are KernelIndex's, from the samples:
    median, p20 and p80, the 95% interval of the median, and the verdict a controlled rerun would
    get (`run_judgement`), labelled as the contributor's. It never changes the evidence level."""
    _require_contributor(author)
    errors: dict[str, list[str]] = {}
    text = _text(text, "text", TEXT_MAX, errors)
    if errors:
        raise ValidationError(errors)
    checked = result_file_check(run=run, content=content)
    median, p20, p80 = medians.quantiles(checked.samples)
    ci_low, ci_high = medians.median_interval(checked.samples) or (None, None)
    digest = checked.document["digest"].removeprefix("sha256:")
    if Attestation.objects.filter(author=author, content_digest=digest).exists():
        raise _duplicate()
    _filed_once(run, digest)
    environment = checked.document["environment"]
    fields = {
        "kind": AttestationKind.REPRODUCTION,
        "origin": AttestationOrigin.FILE,
        "text": text,
        "median": median,
        "p20": p20,
        "p80": p80,
        "unit": run.unit,
        "gpu_product": str(environment.get("gpu_name") or checked.document["device"])[:100],
        **{name: str(environment.get(key) or "")[:VERSION_MAX] for name, key in FILE_VERSION_FIELDS.items()},
        "harness": f"kernelindex-kit {checked.document['kit']['version']}"[:300],
        "samples": checked.samples,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "result": checked.stored,
        "checks": checked.checks,
        **_file_verdict(run, checked, (median, p20, p80)),
    }
    _storable(fields)
    try:
        with transaction.atomic():
            attestation = Attestation.objects.create(run=run, author=author, content_digest=digest, **fields)
    except IntegrityError:  # the same file, filed at the same moment by its author or another
        _filed_once(run, digest)
        raise _duplicate() from None
    filings_changed(user_pk=author.pk)
    _audit(actor=author, target=attestation, action="submitted", to_state=AttestationState.PENDING)
    return attestation


def _filed_once(run: BenchmarkRun, digest: str) -> None:
    """A data-bearing file is one measurement: filed again on its run (by anyone) it would count
    as a second reproduction. A rejected filing does not count."""
    earlier = (
        Attestation.objects.filter(run=run, content_digest=digest, origin=AttestationOrigin.FILE)
        .exclude(state=AttestationState.REJECTED)
        .first()
    )
    if earlier is not None:
        raise ValidationError(
            {
                "file": [
                    f"file: this result file is already filed on run {run.pk} as reproduction "
                    f"#{earlier.pk}; a measurement counts once, whoever files it"
                ]
            }
        )


def _storable(fields: dict) -> None:
    """Serialize before writing: a figure that JSON cannot carry (an infinite deviation from an
    absurd but finite upstream figure, say) would commit a row whose every page then fails."""
    try:
        text = json.dumps(fields, allow_nan=False, default=str)
    except ValueError:
        raise ValidationError(
            {"file": ["file: its figures give a deviation no number can hold; nothing was stored"]}
        ) from None
    if "\\u0000" in text:
        raise ValidationError({"file": ["file: contains a NUL character"]})


def _file_verdict(run: BenchmarkRun, checked, figures: tuple) -> dict:
    if not checked.comparable:
        return {"verdict_note": "Not judged: it was timed on another GPU model than the run's."}
    judged = run_judgement(
        run, samples=checked.samples, upstream=checked.document["upstream"], figures=figures
    )
    return {
        "verdict": judged.verdict,
        "deviation": judged.deviation,
        "deviation_low": judged.low,
        "deviation_high": judged.high,
        "verdict_note": judgement_note(judged, subject="The contributor's file"),
    }


def attestation_clean(*, run: BenchmarkRun, kind: str, **raw) -> dict:
    """The submitted fields, normalised, or a ValidationError naming each bad field."""
    errors: dict[str, list[str]] = {}
    if kind not in AttestationKind.values:
        raise ValidationError({"kind": "Choose a reproduction or a note."})
    fields = {"kind": kind, "text": _text(raw.get("text"), "text", TEXT_MAX, errors)}
    if kind == AttestationKind.NOTE:
        if not fields["text"] and "text" not in errors:
            errors["text"] = ["A note needs some text."]
        for name in REPRODUCTION_FIELDS:
            if raw.get(name) not in (None, "", [], ()):
                errors.setdefault(name, []).append("A note carries text only; leave this empty.")
    else:
        fields.update(_reproduction_clean(run, raw, errors))
    if errors:
        raise ValidationError(errors)
    return fields


def _reproduction_clean(run: BenchmarkRun, raw: dict, errors: dict) -> dict:
    fields = {name: _positive_number(raw.get(name), name, errors) for name in ("median", "p20", "p80")}
    if all(isinstance(fields[n], float) for n in ("median", "p20", "p80")):
        if not fields["p20"] <= fields["median"] <= fields["p80"]:
            errors.setdefault("median", []).append(
                "The figures must satisfy p20 ≤ median ≤ p80 (they are percentiles of the same samples)."
            )
    fields["unit"] = _text(raw.get("unit"), "unit", 10, errors)
    if "unit" not in errors and fields["unit"] != run.unit:
        errors["unit"] = [
            f'This run measures {run.get_metric_display().lower()} in "{run.unit}"; '
            f'give the figures in "{run.unit}".'
        ]
    fields["gpu_product"] = _text(raw.get("gpu_product"), "gpu_product", 100, errors)
    if not fields["gpu_product"] and "gpu_product" not in errors:
        errors["gpu_product"] = ["Name the GPU you ran on."]
    for name in VERSION_FIELDS:
        fields[name] = _text(raw.get(name), name, VERSION_MAX, errors)
    fields["harness"] = _text(raw.get("harness"), "harness", 300, errors)
    fields["links"] = _links(raw.get("links"), errors)
    return fields


def _positive_number(value, name: str, errors: dict) -> float | None:
    if value is None or value == "":
        errors[name] = ["Required for a reproduction."]
        return None
    if isinstance(value, bool) or not isinstance(value, Real | Decimal | str):
        errors[name] = ["Enter a number."]
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        errors[name] = ["Enter a number."]
        return None
    if not math.isfinite(number) or number <= 0:
        errors[name] = ["Enter a finite number greater than zero."]
        return None
    return number


def _text(value, name: str, limit: int, errors: dict) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errors[name] = ["Enter text."]
        return ""
    value = value.strip()
    if "\x00" in value:
        errors[name] = ["Null characters are not allowed."]
    elif len(value) > limit:
        errors[name] = [f"At most {limit} characters (this has {len(value)})."]
    return value


def _links(value, errors: dict) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        errors["links"] = ["Give a list of links."]
        return []
    links: list[str] = []
    for item in value:
        link = _text(item, "links", LINK_MAX, errors)
        if "links" in errors:
            return []
        if not link or link in links:
            continue
        try:
            _http_url(link)
        except ValidationError as exc:
            errors["links"] = [f"{exc.messages[0]} ({link[:80]})"]
            return []
        links.append(link)
    if len(links) > LINKS_MAX:
        errors["links"] = [f"At most {LINKS_MAX} links."]
    return links


def _content_digest(fields: dict) -> str:
    """Whitespace-insensitive, so re-sending the same text with a trailing space is a duplicate."""
    normal = {k: " ".join(v.split()) if isinstance(v, str) else v for k, v in fields.items()}
    return hashlib.sha256(json.dumps(normal, sort_keys=True, default=str).encode()).hexdigest()


def _duplicate() -> ValidationError:
    return ValidationError("You have already submitted exactly this.", code="duplicate")


@transaction.atomic
def attestation_approve(
    *, attestation: Attestation, moderator: AbstractBaseUser, reason: str = ""
) -> Attestation:
    """Publish a pending attestation."""
    _require_perm(moderator, MODERATE_ATTESTATION)
    return _attestation_decide(attestation, moderator, AttestationState.APPROVED, _reason(reason))


@transaction.atomic
def attestation_reject(*, attestation: Attestation, moderator: AbstractBaseUser, reason: str) -> Attestation:
    """Refuse a pending attestation, or take an approved one down; the author sees the reason."""
    _require_perm(moderator, MODERATE_ATTESTATION)
    reason = _reason(reason)
    if not reason:
        raise ValidationError({"reason": "Give the author a reason."})
    return _attestation_decide(attestation, moderator, AttestationState.REJECTED, reason)


def _attestation_decide(attestation, moderator, to_state, reason) -> Attestation:
    current = Attestation.objects.select_for_update().get(pk=attestation.pk)
    _require_not_own(moderator, current.author_id)
    if current.state not in ATTESTATION_TRANSITIONS[to_state]:
        raise TransitionNotAllowed(
            f"{current} is {current.get_state_display().lower()}; it cannot become {to_state}."
        )
    now = timezone.now()
    changes = {
        "state": to_state,
        "decided_by": moderator,
        "decided_at": now,
        "rejection_reason": reason if to_state == AttestationState.REJECTED else "",
    }
    # A decision taken meanwhile by another moderator wins, this one fails.
    _state_set(attestation, current, changes, actor=moderator, reason=reason, meanwhile="decided")
    generation_bump()  # an approved attestation shows on its run's page; a taken-down one no longer does
    return attestation


@transaction.atomic
def reproduction_rerun_request(*, attestation: Attestation, moderator: AbstractBaseUser) -> RerunJob:
    """Turn a data-bearing reproduction that disagrees with its run into a controlled rerun of
    the run (the only thing that can change its evidence level), recorded on the reproduction's
    audit log. Refused (JobRefused) when it carries no data, does not disagree, or the run
    already has an active rerun."""
    _require_perm(moderator, MODERATE_ATTESTATION)
    if not moderator.has_perm("reruns.request_rerun"):
        raise PermissionDenied("Requesting reruns takes the reruns.request_rerun permission.")
    if not (attestation.carries_data and attestation.verdict == Verdict.DISAGREES):
        raise JobRefused(f"{attestation} is not a data-bearing reproduction that disagrees with its run.")
    job = rerun_request(
        run=attestation.run,
        requested_by=moderator,
        reason=f"The contributor's reproduction #{attestation.pk} disagrees: {attestation.verdict_note}"[
            :2000
        ],
    )
    _audit(actor=moderator, target=attestation, action="rerun_requested", reason=f"Rerun job #{job.pk}")
    return job


# --- issue reports --------------------------------------------------------------------------


@transaction.atomic
def issue_report_create(
    *,
    run: BenchmarkRun,
    reporter: AbstractBaseUser | None,
    category: str,
    description: str,
) -> IssueReport:
    """File an issue report about a run. `reporter=None` means KernelIndex filed it itself
    (a diverged rerun, say); such reports skip the per-user duplicate check."""
    if reporter is not None:
        _require_contributor(reporter)
    errors: dict[str, list[str]] = {}
    if category not in IssueReportCategory.values:
        errors["category"] = ["Choose a category."]
    description = _text(description, "description", TEXT_MAX, errors)
    if not description and "description" not in errors:
        errors["description"] = ["Describe the issue."]
    if errors:
        raise ValidationError(errors)
    digest = _content_digest({"run": run.pk, "category": category, "description": description})
    if reporter is not None and IssueReport.objects.filter(reporter=reporter, content_digest=digest).exists():
        raise _duplicate()
    try:
        with transaction.atomic():
            report = IssueReport.objects.create(
                run=run,
                reporter=reporter,
                category=category,
                description=description,
                content_digest=digest,
            )
    except IntegrityError:
        raise _duplicate() from None
    if reporter is not None:
        filings_changed(user_pk=reporter.pk)
    _audit(actor=reporter, target=report, action="filed", to_state=IssueReportState.OPEN)
    return report


@transaction.atomic
def issue_report_transition(
    *,
    report: IssueReport,
    moderator: AbstractBaseUser | None,
    to_state: str,
    resolution: str = "",
) -> IssueReport:
    """Move a report along open → acknowledged → resolved / dismissed. Resolving or dismissing
    needs a resolution text, which the reporter sees. `moderator=None` is KernelIndex itself."""
    if moderator is not None:
        _require_perm(moderator, TRIAGE_REPORT)
    resolution = _reason(resolution, field="resolution")
    if to_state in REPORT_STATES_NEEDING_RESOLUTION and not resolution:
        raise ValidationError({"resolution": "Say how the report was resolved or why it was dismissed."})
    current = IssueReport.objects.select_for_update().get(pk=report.pk)
    if moderator is not None:
        _require_not_own(moderator, current.reporter_id)
    if to_state not in REPORT_TRANSITIONS.get(current.state, set()):
        raise TransitionNotAllowed(
            f"{current} is {current.get_state_display().lower()}; it cannot become {to_state}."
        )
    changes = {"state": to_state, "updated_at": timezone.now()}
    if resolution:
        changes["resolution"] = resolution
    _state_set(report, current, changes, actor=moderator, reason=resolution, meanwhile="changed")
    return report


# --- moderators and contributors ------------------------------------------------------------


@transaction.atomic
def moderator_add(*, user: AbstractBaseUser, actor: AbstractBaseUser | None = None) -> None:
    """Put a user in the moderators group; staff status lets them into the admin."""
    group = Group.objects.get(name=MODERATORS_GROUP)
    was_moderator = user.groups.filter(pk=group.pk).exists()
    user.groups.add(group)
    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    if not was_moderator:
        _audit(actor=actor, target=user, action="moderator_added", reason="")


@transaction.atomic
def api_token_regenerate(*, user: AbstractBaseUser) -> Token:
    """A fresh per-user API token; the old one stops working at once."""
    _require_contributor(user)
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def _require_contributor(user) -> None:
    if not (user and user.is_authenticated and user.is_active):
        raise PermissionDenied("Log in to contribute.")
    if user.groups.filter(name=GPU_WORKERS_GROUP).exists():
        raise PermissionDenied("Worker accounts cannot contribute.")


def _require_perm(user, perm: str) -> None:
    if not (user and user.is_authenticated and user.is_active and user.has_perm(perm)):
        raise PermissionDenied("Only moderators can do this.")


def _require_not_own(moderator, submitter_pk: int | None) -> None:
    """Nobody decides their own submission, superusers included: another moderator must."""
    if submitter_pk is not None and moderator.pk == submitter_pk:
        raise PermissionDenied("This is your own submission: another moderator must decide it.")


def _reason(value, field: str = "reason") -> str:
    errors: dict[str, list[str]] = {}
    value = _text(value, field, REASON_MAX, errors)
    if errors:
        raise ValidationError(errors)
    return value


# --- audit log and notifications ------------------------------------------------------------


def _state_set(target, current, changes: dict, *, actor, reason: str, meanwhile: str) -> None:
    """Compare-and-set, then audit, the one statement of it: write `changes` (with the new
    `state`) only if the row is still in the state `current` was read in, else refuse (someone
    else moved it meanwhile); then update `target` in memory and record the move."""
    model = type(current)
    if model.objects.filter(pk=current.pk, state=current.state).update(**changes) != 1:
        raise TransitionNotAllowed(f"{current} was {meanwhile} by someone else meanwhile.")
    for name, value in changes.items():
        setattr(target, name, value)
    _audit(
        actor=actor,
        target=target,
        action=str(changes["state"]),
        from_state=current.state,
        to_state=changes["state"],
        reason=reason,
    )


_audit = audit_record  # the services' own name for it
