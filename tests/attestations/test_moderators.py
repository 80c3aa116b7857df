"""The `moderators` group (from a data migration) holds exactly what moderating needs, and a
management command makes a user a moderator."""

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.urls import reverse

from attestations.models import AuditEntry
from registry.reruns.models import RerunJob

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
            ("registry", "view_benchmarkrun"),
            ("reruns", "view_rerunjob"),
            ("reruns", "request_rerun"),
        }

    def test_moderator_sees_the_queues_and_log_but_not_users(self, moderator_client):
        for name in ("attestation", "issuereport", "auditentry"):
            assert moderator_client.get(reverse(f"admin:attestations_{name}_changelist")).status_code == 200
        assert moderator_client.get(reverse("admin:auth_user_changelist")).status_code == 403
        assert moderator_client.get(reverse("admin:registry_source_changelist")).status_code == 403

    def test_moderator_requests_a_rerun_but_cannot_edit_the_run(self, moderator_client, runs):
        run = runs["reference"]
        changelist = reverse("admin:registry_benchmarkrun_changelist")
        page = moderator_client.get(changelist)
        assert page.status_code == 200
        assert 'value="request_rerun"' in page.content.decode()
        response = moderator_client.post(
            changelist,
            {"action": "request_rerun", "_selected_action": [run.pk], "apply": "1", "reason": "issue #1"},
            follow=True,
        )
        assert "1 rerun job(s) queued." in response.content.decode()
        job = RerunJob.objects.get(run=run)
        assert (job.reason, job.requested_by.username) == ("issue #1", "mod")
        change = reverse("admin:registry_benchmarkrun_change", args=[run.pk])
        assert moderator_client.get(change).status_code == 200  # read-only view
        assert moderator_client.post(change, {"notes": "edited"}).status_code == 403
        jobs = moderator_client.get(reverse("admin:reruns_rerunjob_changelist")).content.decode()
        assert "Request measure jobs" in jobs
        assert moderator_client.get(reverse("admin:reruns_rerunjob_measure")).status_code == 200


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
