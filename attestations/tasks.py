"""Email notifications, sent after the transaction that caused them commits: the moderators' and
authors' mail about attestations and issue reports, and the moderators' mail about a failed sync."""

import smtplib

from celery import shared_task

from attestations import notifications
from attestations.models import AuditEntry


@shared_task(
    name="attestations.notify",
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=30,
    retry_kwargs={"max_retries": 6},
    time_limit=120,
    soft_time_limit=100,
)
def notify(entry_pk: int) -> int:
    """Email the people an audit entry concerns (moderators for something new, the author for a
    decision). Running it twice sends each email once: sent ones are recorded per address."""
    entry = AuditEntry.objects.filter(pk=entry_pk).select_related("content_type").first()
    if entry is None:  # its transaction was rolled back after all
        return 0
    return notifications.notifications_send(entry=entry)


@shared_task(
    name="registry.sync_failure_notify",  # the name it had when it lived in registry.tasks
    acks_late=True,
    time_limit=120,
    soft_time_limit=100,
    autoretry_for=(OSError,),  # smtplib errors are OSErrors
    retry_backoff=True,
    max_retries=6,
)
def sync_failure_notify_task(sync_pk: int) -> int:
    """Mail the moderators about a failed liger-kernel sync; running it twice mails once."""
    return notifications.sync_failure_notify(sync_pk=sync_pk)
