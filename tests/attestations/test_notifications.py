"""Emails go out through a Celery task sent after commit: to moderators when something new
waits, to the author or reporter when it is decided. A task run twice sends each email once."""

import pytest
from django.core import mail
from django.db import transaction

from attestations import services, tasks
from attestations.models import AuditEntry, Notification
from tests.attestations.conftest import submit_reproduction
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_moderator(moderators_group):
    user = make_user("mod2")
    services.moderator_add(user=user)
    return user


class TestToModerators:
    def test_a_new_attestation_emails_every_moderator_after_commit(
        self, run, contributor, moderator, second_moderator, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            attestation = submit_reproduction(run, contributor)
        assert mail.outbox == []  # nothing before the commit
        for callback in callbacks:
            callback()
        assert sorted(m.to[0] for m in mail.outbox) == ["mod2@example.org", "mod@example.org"]
        message = mail.outbox[0]
        assert message.subject == "[KernelIndex] New reproduction to moderate"
        assert f"/admin/attestations/attestation/{attestation.pk}/change/" in message.body
        assert run.external_id in message.body

    def test_a_new_report_emails_the_moderators(
        self, run, contributor, moderator, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            services.issue_report_create(run=run, reporter=contributor, category="other", description="Hm.")
        assert [(m.to, m.subject) for m in mail.outbox] == [
            (["mod@example.org"], "[KernelIndex] New issue report to triage")
        ]

    def test_a_rolled_back_submission_sends_nothing(
        self, run, contributor, moderator, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            with pytest.raises(RuntimeError), transaction.atomic():
                submit_reproduction(run, contributor)
                raise RuntimeError("the request failed after the service")
        assert callbacks == []
        assert mail.outbox == []


class TestToAuthors:
    def test_the_author_hears_of_a_rejection_and_its_reason(
        self, run, contributor, moderator, django_capture_on_commit_callbacks
    ):
        attestation = submit_reproduction(run, contributor)
        with django_capture_on_commit_callbacks(execute=True):
            services.attestation_reject(
                attestation=attestation, moderator=moderator, reason="p80 below median?"
            )
        assert [m.to for m in mail.outbox] == [["ada@example.org"]]
        assert mail.outbox[0].subject == "[KernelIndex] Your reproduction was rejected"
        assert "p80 below median?" in mail.outbox[0].body
        assert "/me/submissions/" in mail.outbox[0].body

    def test_the_author_hears_of_an_approval(
        self, run, contributor, moderator, django_capture_on_commit_callbacks
    ):
        attestation = submit_reproduction(run, contributor)
        with django_capture_on_commit_callbacks(execute=True):
            services.attestation_approve(attestation=attestation, moderator=moderator)
        assert [(m.to, m.subject) for m in mail.outbox] == [
            (["ada@example.org"], "[KernelIndex] Your reproduction was approved")
        ]

    def test_the_reporter_hears_of_each_state(
        self, run, contributor, moderator, django_capture_on_commit_callbacks
    ):
        report = services.issue_report_create(
            run=run, reporter=contributor, category="other", description="Hm."
        )
        with django_capture_on_commit_callbacks(execute=True):
            services.issue_report_transition(report=report, moderator=moderator, to_state="acknowledged")
            services.issue_report_transition(
                report=report, moderator=moderator, to_state="resolved", resolution="Fixed."
            )
        assert [m.subject for m in mail.outbox] == [
            "[KernelIndex] Your issue report is acknowledged",
            "[KernelIndex] Your issue report is resolved",
        ]
        assert "Fixed." in mail.outbox[1].body

    def test_a_system_report_emails_the_moderators_and_no_reporter(
        self, run, moderator, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            report = services.issue_report_create(
                run=run, reporter=None, category="wrong_value", description="Diverged."
            )
        assert [m.to for m in mail.outbox] == [["mod@example.org"]]
        assert "filed by KernelIndex" in mail.outbox[0].body
        with django_capture_on_commit_callbacks(execute=True):
            services.issue_report_transition(report=report, moderator=moderator, to_state="acknowledged")
        assert len(mail.outbox) == 1


class TestTaskRunsTwice:
    def test_each_address_gets_one_email(self, run, contributor, moderator, second_moderator):
        submit_reproduction(run, contributor)
        entry = AuditEntry.objects.get(action="submitted")
        assert tasks.notify(entry.pk) == 2
        assert tasks.notify(entry.pk) == 0
        assert len(mail.outbox) == 2
        assert Notification.objects.filter(entry=entry).count() == 2

    def test_a_task_killed_halfway_sends_only_the_missing_ones(
        self, run, contributor, moderator, second_moderator
    ):
        submit_reproduction(run, contributor)
        entry = AuditEntry.objects.get(action="submitted")
        Notification.objects.create(entry=entry, email="mod@example.org")  # sent before the kill
        assert tasks.notify(entry.pk) == 1
        assert [m.to for m in mail.outbox] == [["mod2@example.org"]]

    def test_an_entry_that_vanished_is_ignored(self):
        assert tasks.notify(987654) == 0
        assert mail.outbox == []
