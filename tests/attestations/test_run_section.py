"""The run page's "Replications and notes" section and its "Report an issue" link, through the
two template tags the run page includes."""

import pytest
from django.template import Context, Template
from django.urls import reverse

from attestations import services
from registry.models import BenchmarkRun
from tests.attestations.conftest import submit_note, submit_reproduction
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def render(template: str, run) -> str:
    return Template("{% load attestation_tags %}" + template).render(Context({"run": run}))


def public_run(run):
    return BenchmarkRun.objects.public().get(pk=run.pk)


def approve(attestation, moderator):
    return services.attestation_approve(attestation=attestation, moderator=moderator)


class TestSection:
    def test_states_the_rule_and_links_to_the_form(self, run):
        html = render("{% run_attestations run %}", public_run(run))
        assert (
            "Attestations never change the evidence level; only a KernelIndex-controlled rerun does." in html
        )
        assert (
            f'href="{reverse("attestations:attestation-create", args=[run.pk])}">Add a reproduction</a>'
            in html
        )
        assert "No approved reproductions or notes yet." in html

    def test_lists_only_approved_ones(self, run, contributor, moderator):
        approve(submit_note(run, contributor, text="approved note"), moderator)
        submit_note(run, contributor, text="pending note")
        rejected = submit_note(run, contributor, text="rejected note")
        services.attestation_reject(attestation=rejected, moderator=moderator, reason="No.")
        html = render("{% run_attestations run %}", public_run(run))
        assert "approved note" in html
        assert "pending note" not in html and "rejected note" not in html

    def test_summarises_reproductions_per_gpu(self, run, contributor, other_contributor, moderator):
        # the run records 144.2132 ms; the furthest same-GPU reproduction is 2.1% above
        third = make_user("linus")
        approve(submit_reproduction(run, contributor, median=144.0, p20=143.0, p80=145.0), moderator)
        approve(
            submit_reproduction(
                run, other_contributor, median=147.24, p20=147.0, p80=148.0, gpu_product="A100-SXM4-80GB"
            ),
            moderator,
        )
        approve(
            submit_reproduction(
                run, third, median=142.0, p20=141.0, p80=143.0, gpu_product="nvidia a100 sxm4 80gb"
            ),
            moderator,
        )
        approve(
            submit_reproduction(run, third, median=54.8, p20=54.0, p80=55.0, gpu_product="NVIDIA H200"),
            moderator,
        )
        approve(submit_note(run, contributor), moderator)
        html = render("{% run_attestations run %}", public_run(run))
        assert "<li>3 typed reproductions on NVIDIA A100 SXM4 80GB, within ±2.1%</li>" in html
        assert "<li>1 typed reproduction on NVIDIA H200, within ±62.0% (not this run's GPU)</li>" in html
        assert "+2.1% from the recorded" in html
        assert "\u22121.5% from the recorded" in html

    def test_takes_one_query_however_many_attestations(
        self, run, contributor, moderator, django_assert_num_queries
    ):
        run = public_run(run)
        with django_assert_num_queries(1):
            render("{% run_attestations run %}", run)
        for i in range(6):
            approve(submit_reproduction(run, contributor, text=f"r{i}"), moderator)
            approve(submit_note(run, contributor, text=f"n{i}"), moderator)
        with django_assert_num_queries(1):
            html = render("{% run_attestations run %}", run)
        assert html.count('class="attestation ') == 12

    def test_report_link_takes_no_query(self, run, django_assert_num_queries):
        with django_assert_num_queries(0):
            html = render("{% run_report_link run %}", run)
        assert (
            f'href="{reverse("attestations:report-create", args=[run.pk])}">Report an issue with this run'
            in html
        )


class TestPublicPage:
    def test_shows_the_section_and_the_unchanged_evidence_level(self, client, run, contributor, moderator):
        approve(submit_reproduction(run, contributor), moderator)
        response = client.get(reverse("attestations:run-attestations", args=[run.pk]))
        assert response.status_code == 200
        body = response.content.decode()
        assert "1 typed reproduction on NVIDIA A100 SXM4 80GB, within ±0.5%" in body
        assert "evidence level <strong>reported</strong>" in body
        assert "Report an issue with this run" in body

    def test_run_page_shows_the_section(self, client, run):
        body = client.get(run.get_absolute_url()).content.decode()
        assert "Attestations never change the evidence level" in body
        assert "Report an issue with this run" in body
