"""Issue reports: filed by contributors (or by KernelIndex itself), private to the reporter and
the moderators, moved along open → acknowledged → resolved / dismissed."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from attestations import services
from attestations.models import AuditEntry, IssueReport

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:attestations_issuereport_changelist"


def file_report(run, reporter, description="The median is the p80."):
    return services.issue_report_create(
        run=run, reporter=reporter, category=IssueReport.Category.WRONG_VALUE, description=description
    )


class TestFilingAReport:
    def test_visitor_is_sent_to_log_in_and_back(self, client, run):
        url = reverse("attestations:report-create", args=[run.pk])
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('account_login')}?next={url}"

    def test_contributor_files_an_open_report(self, contributor_client, contributor, run):
        response = contributor_client.post(
            reverse("attestations:report-create", args=[run.pk]),
            {"category": "wrong_workload", "description": "The hidden size is 4096, not 11008."},
        )
        assert response.status_code == 302
        report = IssueReport.objects.get()
        assert (report.reporter, report.run, report.state, report.category) == (
            contributor,
            run,
            "open",
            "wrong_workload",
        )
        entry = AuditEntry.objects.for_object(report).get()
        assert (entry.actor, entry.action, entry.to_state) == (contributor, "filed", "open")

    @pytest.mark.parametrize(
        ("data", "field"),
        [
            ({"category": "nonsense", "description": "x"}, "category"),
            ({"category": "other", "description": ""}, "description"),
            ({"category": "other", "description": "x" * 5001}, "description"),
        ],
    )
    def test_bad_reports_are_refused(self, contributor_client, run, data, field):
        response = contributor_client.post(reverse("attestations:report-create", args=[run.pk]), data)
        assert response.status_code == 200
        assert field in response.context["form"].errors
        assert IssueReport.objects.count() == 0

    def test_same_report_twice_is_refused(self, run, contributor):
        file_report(run, contributor)
        with pytest.raises(ValidationError):
            file_report(run, contributor, description="  The median is the p80. ")
        assert IssueReport.objects.count() == 1

    def test_system_files_reports_without_a_reporter_even_twice(self, run):
        first = services.issue_report_create(
            run=run, reporter=None, category="wrong_value", description="Rerun diverged by 12%."
        )
        services.issue_report_create(
            run=run, reporter=None, category="wrong_value", description="Rerun diverged by 12%."
        )
        assert first.is_system_filed
        assert IssueReport.objects.filter(reporter=None).count() == 2
        assert AuditEntry.objects.for_object(first).get().actor is None


class TestTransitions:
    @pytest.mark.parametrize(
        ("path", "final"),
        [
            (["acknowledged"], "acknowledged"),
            (["acknowledged", "resolved"], "resolved"),
            (["acknowledged", "dismissed"], "dismissed"),
            (["resolved"], "resolved"),
            (["dismissed"], "dismissed"),
        ],
    )
    def test_allowed_paths(self, run, contributor, moderator, path, final):
        report = file_report(run, contributor)
        for state in path:
            services.issue_report_transition(
                report=report, moderator=moderator, to_state=state, resolution="Done."
            )
        report.refresh_from_db()
        assert report.state == final
        entries = AuditEntry.objects.for_object(report)
        assert [(e.from_state, e.to_state) for e in entries] == list(
            zip(["", "open", *path[:-1]], ["open", *path], strict=True)
        )
        assert all(e.actor == moderator for e in entries[1:])

    @pytest.mark.parametrize(
        ("path", "refused"),
        [
            (["acknowledged"], "acknowledged"),
            (["acknowledged"], "open"),
            (["resolved"], "dismissed"),
            (["resolved"], "acknowledged"),
            (["dismissed"], "resolved"),
            ([], "open"),
        ],
    )
    def test_refused_transitions(self, run, contributor, moderator, path, refused):
        report = file_report(run, contributor)
        for state in path:
            services.issue_report_transition(
                report=report, moderator=moderator, to_state=state, resolution="x"
            )
        with pytest.raises(services.TransitionNotAllowed):
            services.issue_report_transition(
                report=report, moderator=moderator, to_state=refused, resolution="y"
            )
        report.refresh_from_db()
        assert report.state == (path[-1] if path else "open")

    @pytest.mark.parametrize("state", ["resolved", "dismissed"])
    def test_resolving_or_dismissing_needs_a_resolution(self, run, contributor, moderator, state):
        report = file_report(run, contributor)
        with pytest.raises(ValidationError):
            services.issue_report_transition(
                report=report, moderator=moderator, to_state=state, resolution=""
            )
        report.refresh_from_db()
        assert report.state == "open"

    @pytest.mark.parametrize("who", ["contributor", "other_contributor"])
    def test_contributors_cannot_triage(self, request, run, contributor, who):
        report = file_report(run, contributor)
        with pytest.raises(PermissionDenied):
            services.issue_report_transition(
                report=report, moderator=request.getfixturevalue(who), to_state="dismissed", resolution="no"
            )
        report.refresh_from_db()
        assert report.state == "open"


class TestVisibility:
    def test_reporter_sees_state_and_resolution(self, contributor_client, run, contributor, moderator):
        report = file_report(run, contributor)
        services.issue_report_transition(
            report=report, moderator=moderator, to_state="dismissed", resolution="The value is right."
        )
        response = contributor_client.get(reverse("attestations:report-detail", args=[report.pk]))
        assert response.status_code == 200
        assert "Dismissed" in response.content.decode()
        assert "The value is right." in response.content.decode()
        listing = contributor_client.get(reverse("attestations:my-submissions")).content.decode()
        assert f'id="report-{report.pk}"' in listing and "The value is right." in listing

    def test_other_contributor_and_visitor_cannot_see_a_report(
        self, client, run, contributor, other_contributor
    ):
        report = file_report(run, contributor)
        url = reverse("attestations:report-detail", args=[report.pk])
        assert client.get(url).status_code == 302  # to log in
        client.force_login(other_contributor)
        assert client.get(url).status_code == 404

    def test_moderator_sees_any_report(self, moderator_client, run, contributor):
        report = file_report(run, contributor)
        assert (
            moderator_client.get(reverse("attestations:report-detail", args=[report.pk])).status_code == 200
        )


class TestAdminTriage:
    def test_queue_opens_on_open_and_acknowledged(self, moderator_client, run, contributor, moderator):
        open_one = file_report(run, contributor)
        acknowledged = file_report(run, contributor, description="second")
        services.issue_report_transition(report=acknowledged, moderator=moderator, to_state="acknowledged")
        done = file_report(run, contributor, description="third")
        services.issue_report_transition(
            report=done, moderator=moderator, to_state="resolved", resolution="ok"
        )
        response = moderator_client.get(reverse(CHANGELIST))
        assert response.status_code == 200
        assert [r.pk for r in response.context["cl"].result_list] == [open_one.pk, acknowledged.pk]
        resolved = moderator_client.get(reverse(CHANGELIST), {"state": "resolved"})
        assert [r.pk for r in resolved.context["cl"].result_list] == [done.pk]

    def test_change_page_offers_only_the_next_states(self, moderator_client, run, contributor, moderator):
        report = file_report(run, contributor)
        services.issue_report_transition(report=report, moderator=moderator, to_state="acknowledged")
        body = moderator_client.get(
            reverse("admin:attestations_issuereport_change", args=[report.pk])
        ).content.decode()
        decide = "admin:attestations_issuereport_decide"
        assert reverse(decide, args=[report.pk, "resolved"]) in body
        assert reverse(decide, args=[report.pk, "dismissed"]) in body
        assert reverse(decide, args=[report.pk, "acknowledged"]) not in body

    def test_per_object_resolution(self, moderator_client, run, contributor):
        report = file_report(run, contributor)
        url = reverse("admin:attestations_issuereport_decide", args=[report.pk, "resolved"])
        response = moderator_client.post(url, {"reason": "Fixed upstream; rerun requested."})
        assert response.status_code == 302
        report.refresh_from_db()
        assert (report.state, report.resolution) == ("resolved", "Fixed upstream; rerun requested.")

    def test_bulk_acknowledge_then_dismiss(self, moderator_client, run, contributor):
        a, b = file_report(run, contributor), file_report(run, contributor, description="two")
        ids = {ACTION_CHECKBOX_NAME: [a.pk, b.pk], "apply": "1"}
        response = moderator_client.post(
            reverse(CHANGELIST), {**ids, "action": "acknowledge_selected", "reason": ""}
        )
        assert response.status_code == 302
        assert set(IssueReport.objects.values_list("state", flat=True)) == {"acknowledged"}
        response = moderator_client.post(
            reverse(CHANGELIST), {**ids, "action": "dismiss_selected", "reason": "Not reproducible."}
        )
        assert response.status_code == 302
        assert set(IssueReport.objects.values_list("state", "resolution")) == {
            ("dismissed", "Not reproducible.")
        }

    def test_staff_without_the_permission_cannot_triage(self, client, run, contributor, other_contributor):
        other_contributor.is_staff = True
        other_contributor.save()
        client.force_login(other_contributor)
        report = file_report(run, contributor)
        url = reverse("admin:attestations_issuereport_decide", args=[report.pk, "dismissed"])
        assert client.post(url, {"reason": "x"}).status_code == 403
        report.refresh_from_db()
        assert report.state == "open"
