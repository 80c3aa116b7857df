"""Moderators approve and reject attestations, one at a time or in bulk, in the admin; nobody
else can. No decision ever changes the run's evidence level."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from attestations import services
from attestations.models import Attestation, AuditEntry
from tests.attestations.conftest import submit_note, submit_reproduction

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:attestations_attestation_changelist"


def decide_url(attestation, decision):
    return reverse("admin:attestations_attestation_decide", args=[attestation.pk, decision])


class TestTransitions:
    def test_pending_to_approved(self, run, contributor, moderator):
        attestation = submit_reproduction(run, contributor)
        services.attestation_approve(attestation=attestation, moderator=moderator, reason="Matches.")
        attestation.refresh_from_db()
        assert attestation.state == Attestation.State.APPROVED
        assert (attestation.decided_by, attestation.rejection_reason) == (moderator, "")
        assert attestation.decided_at is not None
        assert Attestation.objects.approved().count() == 1

    def test_pending_to_rejected_keeps_the_reason_for_the_author(self, run, contributor, moderator):
        attestation = submit_reproduction(run, contributor)
        services.attestation_reject(attestation=attestation, moderator=moderator, reason="Wrong GPU.")
        attestation.refresh_from_db()
        assert (attestation.state, attestation.rejection_reason) == ("rejected", "Wrong GPU.")
        assert Attestation.objects.approved().count() == 0

    def test_approved_can_be_taken_down_with_a_reason(self, run, contributor, moderator):
        attestation = services.attestation_approve(
            attestation=submit_reproduction(run, contributor), moderator=moderator
        )
        services.attestation_reject(attestation=attestation, moderator=moderator, reason="Link is spam.")
        attestation.refresh_from_db()
        assert attestation.state == "rejected"
        assert Attestation.objects.approved().count() == 0

    def test_rejection_needs_a_reason(self, run, contributor, moderator):
        attestation = submit_reproduction(run, contributor)
        with pytest.raises(ValidationError):
            services.attestation_reject(attestation=attestation, moderator=moderator, reason="   ")
        attestation.refresh_from_db()
        assert attestation.state == "pending"
        assert AuditEntry.objects.for_object(attestation).count() == 1  # only the submission

    @pytest.mark.parametrize(
        ("first", "then"),
        [("approve", "approve"), ("reject", "approve"), ("reject", "reject")],
    )
    def test_transitions_that_do_not_exist_are_refused(self, run, contributor, moderator, first, then):
        attestation = submit_reproduction(run, contributor)
        decide = {
            "approve": lambda a: services.attestation_approve(attestation=a, moderator=moderator),
            "reject": lambda a: services.attestation_reject(attestation=a, moderator=moderator, reason="No."),
        }
        decide[first](attestation)
        state = Attestation.objects.get().state
        with pytest.raises(services.TransitionNotAllowed):
            decide[then](Attestation.objects.get())
        assert Attestation.objects.get().state == state
        assert AuditEntry.objects.for_object(attestation).count() == 2

    def test_a_stale_copy_cannot_decide_again(self, run, contributor, moderator):
        """Two moderators open the same pending attestation; the second decision fails."""
        first_copy = submit_reproduction(run, contributor)
        second_copy = Attestation.objects.get(pk=first_copy.pk)
        services.attestation_approve(attestation=first_copy, moderator=moderator)
        with pytest.raises(services.TransitionNotAllowed):
            services.attestation_approve(attestation=second_copy, moderator=moderator)
        assert AuditEntry.objects.filter(action="approved").count() == 1


class TestWhoMayDecide:
    @pytest.mark.parametrize("who", ["contributor", "other_contributor"])
    def test_contributors_cannot_decide_through_the_service(self, request, run, contributor, who):
        attestation = submit_reproduction(run, contributor)
        user = request.getfixturevalue(who)
        with pytest.raises(PermissionDenied):
            services.attestation_approve(attestation=attestation, moderator=user)
        with pytest.raises(PermissionDenied):
            services.attestation_reject(attestation=attestation, moderator=user, reason="x")
        attestation.refresh_from_db()
        assert attestation.state == "pending"

    def test_visitor_is_sent_to_the_admin_login(self, client, run, contributor):
        attestation = submit_reproduction(run, contributor)
        response = client.post(decide_url(attestation, "approve"), {"reason": ""})
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]
        assert Attestation.objects.get().state == "pending"

    def test_contributor_cannot_reach_the_admin(self, contributor_client, run, contributor):
        attestation = submit_reproduction(run, contributor)
        response = contributor_client.post(decide_url(attestation, "approve"), {"reason": ""})
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]
        assert contributor_client.get(reverse(CHANGELIST)).status_code == 302
        assert Attestation.objects.get().state == "pending"

    def test_staff_without_the_permission_cannot_decide(self, client, run, contributor, other_contributor):
        other_contributor.is_staff = True
        other_contributor.save()
        client.force_login(other_contributor)
        attestation = submit_reproduction(run, contributor)
        assert client.post(decide_url(attestation, "approve"), {"reason": ""}).status_code == 403
        assert client.get(reverse(CHANGELIST)).status_code == 403
        assert Attestation.objects.get().state == "pending"


class TestAdminQueue:
    def test_queue_opens_on_pending_oldest_first(self, moderator_client, run, contributor, moderator):
        first = submit_reproduction(run, contributor)
        second = submit_note(run, contributor)
        decided = submit_note(run, contributor, text="decided")
        services.attestation_approve(attestation=decided, moderator=moderator)
        response = moderator_client.get(reverse(CHANGELIST))
        assert response.status_code == 200
        assert [a.pk for a in response.context["cl"].result_list] == [first.pk, second.pk]
        everything = moderator_client.get(reverse(CHANGELIST), {"state": "all"})
        assert everything.context["cl"].result_count == 3

    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            ({"kind__exact": "note"}, 1),
            ({"kind__exact": "reproduction"}, 1),
            ({"age": "day"}, 2),
            ({"age": "older"}, 0),
            ({"state": "approved"}, 0),
        ],
    )
    def test_queue_filters(self, moderator_client, run, contributor, params, expected):
        submit_reproduction(run, contributor)
        submit_note(run, contributor)
        response = moderator_client.get(reverse(CHANGELIST), params)
        assert response.status_code == 200
        assert response.context["cl"].result_count == expected

    def test_queue_filters_by_run_and_author(self, moderator_client, runs, contributor, other_contributor):
        submit_note(runs["reference"], contributor)
        submit_note(runs["memory"], other_contributor)
        by_run = moderator_client.get(reverse(CHANGELIST), {"run__id__exact": runs["memory"].pk})
        assert [a.run_id for a in by_run.context["cl"].result_list] == [runs["memory"].pk]
        by_author = moderator_client.get(reverse(CHANGELIST), {"author__id__exact": contributor.pk})
        assert [a.author_id for a in by_author.context["cl"].result_list] == [contributor.pk]

    def test_change_page_is_read_only_with_decision_buttons_and_audit_log(
        self, moderator_client, run, contributor
    ):
        attestation = submit_reproduction(run, contributor)
        response = moderator_client.get(
            reverse("admin:attestations_attestation_change", args=[attestation.pk])
        )
        assert response.status_code == 200
        body = response.content.decode()
        assert decide_url(attestation, "approve") in body
        assert decide_url(attestation, "reject") in body
        assert 'name="_save"' not in body
        assert "Audit log" in body and "submitted" in body

    def test_nothing_can_be_added_or_deleted_in_the_admin(self, admin_client, run, contributor):
        attestation = submit_reproduction(run, contributor)
        assert admin_client.get(reverse("admin:attestations_attestation_add")).status_code == 403
        delete = reverse("admin:attestations_attestation_delete", args=[attestation.pk])
        assert admin_client.post(delete, {"post": "yes"}).status_code == 403
        assert Attestation.objects.count() == 1


class TestAdminDecisions:
    def test_per_object_approval(self, moderator_client, run, contributor, moderator):
        attestation = submit_reproduction(run, contributor)
        assert moderator_client.get(decide_url(attestation, "approve")).status_code == 200
        response = moderator_client.post(decide_url(attestation, "approve"), {"reason": ""})
        assert response.status_code == 302
        attestation.refresh_from_db()
        assert (attestation.state, attestation.decided_by) == ("approved", moderator)

    def test_per_object_rejection_asks_for_a_reason(self, moderator_client, run, contributor):
        attestation = submit_reproduction(run, contributor)
        response = moderator_client.post(decide_url(attestation, "reject"), {"reason": ""})
        assert response.status_code == 200
        assert response.context["form"].errors["reason"]
        assert Attestation.objects.get().state == "pending"
        response = moderator_client.post(
            decide_url(attestation, "reject"), {"reason": "Numbers from another run."}
        )
        assert response.status_code == 302
        attestation.refresh_from_db()
        assert (attestation.state, attestation.rejection_reason) == ("rejected", "Numbers from another run.")

    def test_deciding_twice_shows_an_error_and_changes_nothing(self, moderator_client, run, contributor):
        attestation = submit_reproduction(run, contributor)
        moderator_client.post(decide_url(attestation, "reject"), {"reason": "No."})
        response = moderator_client.post(decide_url(attestation, "approve"), {"reason": ""}, follow=True)
        assert response.status_code == 200
        assert "cannot become approved" in response.content.decode()
        assert Attestation.objects.get().state == "rejected"

    def test_bulk_approval_with_a_note(self, moderator_client, run, contributor):
        a, b = submit_reproduction(run, contributor), submit_note(run, contributor)
        data = {"action": "approve_selected", ACTION_CHECKBOX_NAME: [a.pk, b.pk]}
        confirm = moderator_client.post(reverse(CHANGELIST), data)
        assert confirm.status_code == 200
        assert Attestation.objects.approved().count() == 0
        response = moderator_client.post(reverse(CHANGELIST), {**data, "apply": "1", "reason": "Thanks!"})
        assert response.status_code == 302
        assert Attestation.objects.approved().count() == 2
        assert list(AuditEntry.objects.filter(action="approved").values_list("reason", flat=True)) == [
            "Thanks!",
            "Thanks!",
        ]

    def test_bulk_rejection_needs_a_reason(self, moderator_client, run, contributor):
        a, b = submit_reproduction(run, contributor), submit_note(run, contributor)
        data = {"action": "reject_selected", ACTION_CHECKBOX_NAME: [a.pk, b.pk], "apply": "1"}
        response = moderator_client.post(reverse(CHANGELIST), {**data, "reason": ""})
        assert response.status_code == 200
        assert Attestation.objects.filter(state="pending").count() == 2
        response = moderator_client.post(reverse(CHANGELIST), {**data, "reason": "Duplicates of #1."})
        assert response.status_code == 302
        assert set(Attestation.objects.values_list("state", "rejection_reason")) == {
            ("rejected", "Duplicates of #1.")
        }

    def test_bulk_takedown_of_approved_ones_keeps_the_list_filter(
        self, moderator_client, run, contributor, moderator
    ):
        a = services.attestation_approve(attestation=submit_note(run, contributor), moderator=moderator)
        data = {"action": "reject_selected", ACTION_CHECKBOX_NAME: [a.pk], "apply": "1", "reason": "Spam."}
        response = moderator_client.post(reverse(CHANGELIST) + "?state=approved", data)
        assert response.status_code == 302
        a.refresh_from_db()
        assert a.state == "rejected"


class TestEvidenceLevelNeverChanges:
    def test_no_submission_or_decision_changes_the_run(self, run, contributor, other_contributor, moderator):
        before = (run.evidence_level, run.digest, run.median, run.rank, run.updated_at)
        approved = submit_reproduction(run, contributor, median=100.0, p20=99.0, p80=101.0)
        services.attestation_approve(attestation=approved, moderator=moderator)
        rejected = submit_note(run, other_contributor)
        services.attestation_reject(attestation=rejected, moderator=moderator, reason="No.")
        report = services.issue_report_create(
            run=run, reporter=contributor, category="wrong_value", description="Too slow."
        )
        services.issue_report_transition(report=report, moderator=moderator, to_state="acknowledged")
        services.issue_report_transition(
            report=report, moderator=moderator, to_state="resolved", resolution="ok"
        )
        run.refresh_from_db()
        assert (run.evidence_level, run.digest, run.median, run.rank, run.updated_at) == before
        assert run.evidence_level == "reported"
