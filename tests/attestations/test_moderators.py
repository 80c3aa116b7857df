"""The `moderators` group (from a data migration) holds exactly what moderating needs, and a
management command makes a user a moderator."""

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.urls import reverse

from attestations.models import AuditEntry

pytestmark = pytest.mark.django_db


class TestGroup:
    def test_has_exactly_the_moderation_permissions(self, moderators_group):
        group = Group.objects.get(name="moderators")
        assert set(group.permissions.values_list("content_type__app_label", "codename")) == {
            ("attestations", "view_attestation"),
            ("attestations", "moderate_attestation"),
            ("attestations", "view_issuereport"),
            ("attestations", "triage_issuereport"),
            ("attestations", "view_auditentry"),
        }

    def test_moderator_sees_the_queues_and_log_but_not_users(self, moderator_client):
        for name in ("attestation", "issuereport", "auditentry"):
            assert moderator_client.get(reverse(f"admin:attestations_{name}_changelist")).status_code == 200
        assert moderator_client.get(reverse("admin:auth_user_changelist")).status_code == 403
        assert moderator_client.get(reverse("admin:registry_benchmarkrun_changelist")).status_code == 403


class TestCommand:
    def test_makes_a_user_a_moderator_by_username_or_email(
        self, moderators_group, contributor, other_contributor, capsys
    ):
        call_command("moderator_add", "ada")
        call_command("moderator_add", "GRACE@example.org")
        for user in (contributor, other_contributor):
            user.refresh_from_db()
            assert user.is_staff
            assert user.groups.filter(name="moderators").exists()
            assert user.has_perm("attestations.moderate_attestation")
        assert "ada is a moderator." in capsys.readouterr().out

    def test_running_it_twice_changes_nothing_more(self, moderators_group, contributor):
        call_command("moderator_add", "ada")
        call_command("moderator_add", "ada")
        assert contributor.groups.count() == 1
        assert AuditEntry.objects.filter(action="moderator_added").count() == 1

    def test_unknown_user_fails_loudly(self, db):
        with pytest.raises(CommandError, match="No single user"):
            call_command("moderator_add", "nobody")
