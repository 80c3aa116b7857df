"""Mail to the moderators and to authors: what a notification task sends.

Kept apart from the services that queue the tasks (attestations.services,
registry.sources.liger.sync), so that a task module imports only this and the services import the
task modules, never in a circle. The moderators group and who in it is mailed are stated here once.
"""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from attestations.models import Attestation, AuditEntry, IssueReport, Notification
from registry.models import SourceSync

logger = logging.getLogger(__name__)
MODERATORS_GROUP = "moderators"


def moderator_emails(*, exclude_pk: int | None = None) -> list[str]:
    """The addresses of active moderators, sorted, once each; `exclude_pk` leaves out one user
    (the moderator who took the decision). Filtering through the group name: a site whose
    moderators group was removed notifies nobody rather than failing the task (and retrying it)
    forever."""
    moderators = (
        get_user_model().objects.filter(groups__name=MODERATORS_GROUP, is_active=True).exclude(email="")
    )
    if exclude_pk is not None:
        moderators = moderators.exclude(pk=exclude_pk)
    return sorted(set(moderators.values_list("email", flat=True)))


def notifications_send(*, entry: AuditEntry) -> int:
    """Email whoever this entry concerns; returns how many emails went out now.

    Not one transaction on purpose: each email is recorded as soon as it is sent, so a task
    killed halfway and run again sends only the ones still missing.
    """
    message = _notification_for(entry)
    if message is None:
        return 0
    recipients, subject, body = message
    done = set(Notification.objects.filter(entry=entry).values_list("email", flat=True))
    sent = 0
    for email in sorted(set(recipients) - done):
        send_mail(subject, body, None, [email])
        try:
            Notification.objects.create(entry=entry, email=email)
        except IntegrityError:  # a second delivery of the task sent it at the same moment
            continue
        sent += 1
    return sent


def _notification_for(entry: AuditEntry) -> tuple[list[str], str, str] | None:
    target = entry.target
    if isinstance(target, Attestation):
        author = target.author
        if entry.action == "submitted":
            return _to_moderators(entry, target, f"New {target.get_kind_display().lower()} to moderate")
        return _to_user(author, entry, target, f"Your {target.get_kind_display().lower()} was {entry.action}")
    if isinstance(target, IssueReport):
        if entry.action == "filed":
            return _to_moderators(entry, target, "New issue report to triage")
        return _to_user(target.reporter, entry, target, f"Your issue report is {entry.to_state}")
    return None


def _to_moderators(entry, target, subject):
    emails = moderator_emails(exclude_pk=entry.actor_id)
    admin_path = reverse(f"admin:{target._meta.app_label}_{target._meta.model_name}_change", args=[target.pk])
    body = render_to_string(
        "attestations/email/to_moderators.txt",
        {"entry": entry, "target": target, "url": settings.SITE_URL + admin_path},
    )
    return emails, f"[KernelIndex] {subject}", body


def _to_user(user, entry, target, subject):
    if user is None or not user.email or not user.is_active:
        return None
    body = render_to_string(
        "attestations/email/to_author.txt",
        {
            "user": user,
            "entry": entry,
            "target": target,
            "url": settings.SITE_URL + reverse("attestations:my-submissions"),
        },
    )
    return [user.email], f"[KernelIndex] {subject}", body


@transaction.atomic
def sync_failure_notify(*, sync_pk: int) -> int:
    """Mail the moderators about a failed sync; returns how many were mailed. Sent at least once:
    the row is marked only after the mail went, so a retry after a mail-server error sends it."""
    sync = SourceSync.objects.select_for_update().get(pk=sync_pk)
    if sync.status != SourceSync.Status.FAILED or sync.notified_at is not None:
        return 0
    recipients = moderator_emails()
    if recipients:
        send_mail(
            subject=f"[KernelIndex] liger-kernel sync failed ({sync.release or sync.requested_version or 'newest'})",
            message=_failure_message(sync),
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=recipients,
        )
    else:
        logger.warning("liger-kernel sync %s failed and no moderator has an email address", sync.pk)
    sync.notified_at = timezone.now()
    sync.save(update_fields=["notified_at"])
    return len(recipients)


def _failure_message(sync: SourceSync) -> str:
    return (
        f"The liger-kernel sync #{sync.pk} (release {sync.release or 'unknown'}, requested "
        f"{sync.requested_version or 'newest'}) failed at {sync.finished_at:%Y-%m-%d %H:%M} UTC.\n"
        "Nothing of that release was imported; the registry is unchanged.\n\n"
        f"Error: {sync.error}\n\n"
        f"Archive: {sync.archive_url or 'not found'}\n"
        f"Operations page: {settings.SITE_URL.rstrip('/')}/admin/operations/\n"
    )
