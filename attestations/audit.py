"""The audit log's one writer: an entry for a change, written in the caller's transaction, and the
notification sent once it commits. Apart from attestations/services.py so that the registry's
admin and the rerun app's services can audit without importing the attestation services (which
queue reruns themselves)."""

from functools import partial

from django.contrib.contenttypes.models import ContentType
from django.db import transaction

from attestations.models import AuditEntry
from attestations.tasks import notify


def audit_record(
    *, actor, target, action: str, from_state: str = "", to_state: str = "", reason: str = "", label: str = ""
):
    """`label`: how the log names the target, where its own text (str) should not be written."""
    entry = AuditEntry.objects.create(
        actor=actor,
        content_type=ContentType.objects.get_for_model(target),
        object_id=target.pk,
        object_repr=(label or str(target))[:200],
        action=action,
        from_state=str(from_state),
        to_state=str(to_state),
        reason=reason,
    )
    # robust: a broker that is down must not turn a committed submission into an error page.
    transaction.on_commit(partial(notify.delay, entry.pk), robust=True)
    return entry
