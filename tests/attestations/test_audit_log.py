"""The audit log records every decision and state change, and can be neither edited nor deleted,
not even by a superuser."""

import pytest
from django.urls import reverse

from attestations import services
from attestations.models import AuditEntry
from tests.attestations.conftest import submit_reproduction

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(run, contributor, moderator):
    attestation = submit_reproduction(run, contributor)
    services.attestation_approve(attestation=attestation, moderator=moderator, reason="Agrees within 1%.")
    services.attestation_reject(attestation=attestation, moderator=moderator, reason="Artifact link is dead.")
    return attestation


class TestWhatIsRecorded:
    def test_each_change_records_who_what_from_to_and_why(self, history, contributor, moderator):
        entries = list(AuditEntry.objects.for_object(history))
        assert [(e.actor, e.action, e.from_state, e.to_state, e.reason) for e in entries] == [
            (contributor, "submitted", "", "pending", ""),
            (moderator, "approved", "pending", "approved", "Agrees within 1%."),
            (moderator, "rejected", "approved", "rejected", "Artifact link is dead."),
        ]
        assert all(e.object_repr == str(history) for e in entries)
        assert entries[0].created_at <= entries[1].created_at <= entries[2].created_at

    def test_making_a_moderator_is_recorded(self, moderator):
        entry = AuditEntry.objects.for_object(moderator).get()
        assert (entry.action, entry.actor) == ("moderator_added", None)


class TestAppendOnly:
    def test_an_entry_cannot_be_saved_again(self, history):
        entry = AuditEntry.objects.for_object(history).first()
        entry.reason = "rewritten"
        with pytest.raises(TypeError):
            entry.save()
        assert AuditEntry.objects.for_object(history).first().reason == ""

    def test_an_entry_cannot_be_deleted(self, history):
        entry = AuditEntry.objects.for_object(history).first()
        with pytest.raises(TypeError):
            entry.delete()
        with pytest.raises(TypeError):
            AuditEntry.objects.all().delete()
        with pytest.raises(TypeError):
            AuditEntry.objects.update(reason="x")
        assert AuditEntry.objects.for_object(history).count() == 3


class TestInTheAdmin:
    def test_moderators_read_the_log(self, moderator_client, history):
        response = moderator_client.get(reverse("admin:attestations_auditentry_changelist"))
        assert response.status_code == 200
        assert response.context["cl"].result_count == AuditEntry.objects.count()
        assert "Artifact link is dead." in response.content.decode()

    def test_log_can_be_filtered_by_action(self, moderator_client, history):
        response = moderator_client.get(
            reverse("admin:attestations_auditentry_changelist"), {"action__exact": "approved"}
        )
        assert response.context["cl"].result_count == 1

    def test_even_a_superuser_cannot_add_change_or_delete(self, admin_client, history):
        entry = AuditEntry.objects.for_object(history).first()
        assert admin_client.get(reverse("admin:attestations_auditentry_add")).status_code == 403
        change = admin_client.post(
            reverse("admin:attestations_auditentry_change", args=[entry.pk]), {"reason": "rewritten"}
        )
        assert change.status_code == 403
        delete = admin_client.post(
            reverse("admin:attestations_auditentry_delete", args=[entry.pk]), {"post": "yes"}
        )
        assert delete.status_code == 403
        entry = AuditEntry.objects.get(pk=entry.pk)
        assert entry.reason == ""
        listing = admin_client.get(reverse("admin:attestations_auditentry_changelist"))
        assert "delete_selected" not in listing.content.decode()

    def test_contributors_cannot_read_the_log(self, contributor_client, history):
        response = contributor_client.get(reverse("admin:attestations_auditentry_changelist"))
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]
