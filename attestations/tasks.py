"""Email notifications, sent after the transaction that caused them commits."""

import smtplib

from celery import shared_task

from attestations import services
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
    return services.notifications_send(entry=entry)
