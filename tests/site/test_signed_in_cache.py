"""Signed-in pages (registry/cache.py): the stored page, the same for everyone, with only the
visitor's own regions rendered per request (the header's account links, their messages, their
submissions on a run, a moderator's controls). Their own write shows on the next request; what
the shared part costs does not grow with the registry; nobody sees anyone else's."""

import json
import re

import pytest
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.core.cache import cache
from django.db import connection
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.template.backends.django import Template as DjangoTemplate
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.safestring import mark_safe
from rest_framework.authtoken.models import Token

from attestations import selectors, services
from attestations.models import Attestation, IssueReport
from registry import cache as page_cache
from registry.models import BenchmarkRun
from registry.templatetags import site_tags
from tests.attestations.conftest import REPRODUCTION, submit_note
from tests.attestations.test_data_reproductions import result_file
from tests.faults.support import small_cpu_rows
from tests.reruns.conftest import csv_import
from tests.site.conftest import liger_rows
from tests.site.test_query_counts import LARGE, SMALL, _run

PAGES = {
    "run page": lambda: _run().get_absolute_url(),
    "kernel page": lambda: reverse("registry:kernel-detail", args=["geglu"]),
    "compare page": lambda: reverse("registry:compare", args=[_run().pk, _run("liger").pk]),
    "API runs": lambda: reverse("run-list") + "?kernel=geglu",
}
# Queries of a signed-in request once the shared part is stored: the user (the session is read
# from the cache), and on the run page the visitor's own attestations and issue reports (one
# query, skipped for a user known to have filed nothing); a moderator's permissions and the
# run's two queues in one more. The rest of the page comes from the cache.
CONTRIBUTOR_QUERIES = {"run page": 2, "kernel page": 1, "compare page": 1, "API runs": 1}
NOTHING_FILED_RUN_PAGE_QUERIES = 1
MODERATOR_RUN_PAGE_QUERIES = 2  # a moderator who has filed nothing, as the tests' one has


def without_personal_regions(content: bytes) -> bytes:
    return re.sub(rb"<!--personal:.*?<!--/personal-->", b"", content, flags=re.DOTALL)


@pytest.fixture
def registry(import_rows):
    import_rows(liger_rows(**SMALL))
    return BenchmarkRun.objects.all()


@pytest.mark.django_db
class TestASignedInVisitorGetsTheStoredPagePersonalised:
    @pytest.mark.parametrize("name", ["run page", "kernel page", "compare page"])
    def test_the_page_is_the_anonymous_one_with_their_own_header(self, client, registry, contributor, name):
        url = PAGES[name]()
        anonymous = client.get(url)
        client.force_login(contributor)
        signed_in = client.get(url)
        assert signed_in.status_code == 200
        assert signed_in[page_cache.SHARED_HEADER] == "hit"
        assert page_cache.HIT_HEADER not in signed_in
        assert b"Account (ada)" in signed_in.content and b"Sign out" in signed_in.content
        assert b">Sign in<" not in signed_in.content
        assert without_personal_regions(signed_in.content) == without_personal_regions(anonymous.content)

    def test_a_signed_in_miss_stores_the_anonymous_page_for_everyone(self, client, registry, contributor):
        url = PAGES["run page"]()
        client.force_login(contributor)
        assert client.get(url)[page_cache.SHARED_HEADER] == "miss"
        assert client.get(url)[page_cache.SHARED_HEADER] == "hit"
        client.logout()
        anonymous = client.get(url)
        assert anonymous[page_cache.HIT_HEADER] == "hit"
        assert b">Sign in<" in anonymous.content
        assert b"Account (ada)" not in anonymous.content

    def test_a_registry_change_shows_on_a_signed_in_page_at_once(
        self, client, registry, contributor, import_rows
    ):
        url = PAGES["kernel page"]()
        client.force_login(contributor)
        client.get(url)
        import_rows(liger_rows(**SMALL, kernels=("geglu",)) + liger_rows(kernels=("geglu",), xs=(4096,)))
        response = client.get(url)
        assert response[page_cache.SHARED_HEADER] == "miss"
        assert b"4096" in response.content

    def test_a_message_waiting_in_the_session_is_shown_once(self, client, registry, contributor):
        client.force_login(contributor)
        run = _run()
        data = {"kind": "note", "text": "Timed with the forward pass included."}
        client.post(reverse("attestations:attestation-create", args=[run.pk]), data)
        first = client.get(run.get_absolute_url())
        assert b"waits for a moderator" in first.content
        assert b"waits for a moderator" not in client.get(run.get_absolute_url()).content

    def test_the_api_serves_a_signed_in_caller_the_stored_bytes(self, client, registry, contributor):
        url = PAGES["API runs"]()
        anonymous = client.get(url)
        token = Token.objects.create(user=contributor)
        by_token = client.get(url, headers={"authorization": f"Token {token.key}"})
        client.force_login(contributor)
        by_session = client.get(url)
        assert by_token[page_cache.HIT_HEADER] == by_session[page_cache.HIT_HEADER] == "hit"
        assert by_token.content == by_session.content == anonymous.content

    def test_a_page_that_uses_the_csrf_token_is_rendered_for_the_visitor_and_not_stored(self, contributor):
        calls = []

        def view(request):
            calls.append(request.user)
            return HttpResponse(f"token {get_token(request)} for {request.user}")

        request = RequestFactory().get("/somewhere/")
        request.user, request.session = contributor, {}
        response = page_cache.cached_page(view)(request)
        assert response.content.endswith(b"for ada")
        assert page_cache.SHARED_HEADER not in response
        assert isinstance(calls[0], AnonymousUser) and calls[1] == contributor
        anonymous = RequestFactory().get("/somewhere/")
        anonymous.user = AnonymousUser()
        assert page_cache.cached_page(view)(anonymous)[page_cache.HIT_HEADER] == "miss"


@pytest.mark.django_db
class TestTheirOwnSubmissionsShowAtOnce:
    def test_a_reproduction_they_file_is_on_the_run_page_on_the_next_request(
        self, client, registry, contributor
    ):
        run = _run()
        client.force_login(contributor)
        client.get(run.get_absolute_url())  # the shared part is stored before the write
        data = {**REPRODUCTION, "kind": "reproduction"}
        response = client.post(reverse("attestations:attestation-create", args=[run.pk]), data)
        assert response.status_code == 302
        attestation = Attestation.objects.get(author=contributor)
        page = client.get(run.get_absolute_url())
        assert page[page_cache.SHARED_HEADER] == "hit"
        assert f'id="own-attestation-{attestation.pk}"'.encode() in page.content
        assert b"Pending moderation" in page.content

    def test_an_issue_report_they_file_is_on_the_run_page_on_the_next_request(
        self, client, registry, contributor
    ):
        run = _run()
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        data = {"category": "wrong_environment", "description": "The driver version is not recorded."}
        assert client.post(reverse("attestations:report-create", args=[run.pk]), data).status_code == 302
        report = IssueReport.objects.get(reporter=contributor)
        assert f'id="own-report-{report.pk}"'.encode() in client.get(run.get_absolute_url()).content

    def test_nobody_else_sees_a_pending_note(self, client, registry, contributor, other_contributor):
        run = _run()
        note = submit_note(run, contributor, text="Only the author may read this yet.")
        marker = f"own-attestation-{note.pk}".encode()
        client.force_login(contributor)
        assert marker in client.get(run.get_absolute_url()).content
        client.force_login(other_contributor)
        page = client.get(run.get_absolute_url())
        assert marker not in page.content and b"Only the author" not in page.content
        client.logout()
        assert marker not in client.get(run.get_absolute_url()).content


def _filings_marker_clear(user) -> None:
    cache.delete(selectors.FILINGS_KEY.format(user_pk=user.pk))


def _own_attestation(page, attestation) -> bool:
    return f'id="own-attestation-{attestation.pk}"'.encode() in page.content


@pytest.mark.django_db
class TestAUserWhoHasFiledNothingIsNotAskedForTheirSubmissions:
    def test_their_run_page_hit_takes_one_query_fewer_than_a_contributors(
        self, client, registry, contributor
    ):
        url = PAGES["run page"]()
        client.force_login(contributor)
        client.get(url)  # stores the shared part; finds nothing of theirs anywhere
        assert _queries(client, url) == NOTHING_FILED_RUN_PAGE_QUERIES == CONTRIBUTOR_QUERIES["run page"] - 1

    def test_the_marker_is_read_with_the_page_not_in_a_round_trip_of_its_own(
        self, client, registry, contributor, monkeypatch
    ):
        url = PAGES["run page"]()
        client.force_login(contributor)
        client.get(url)

        class NoReads:
            def __getattr__(self, name):
                pytest.fail(f"the run region read the cache on its own ({name})")

        monkeypatch.setattr(selectors, "cache", NoReads())
        assert _queries(client, url) == NOTHING_FILED_RUN_PAGE_QUERIES

    @pytest.mark.parametrize("kind", ["note", "reproduction"])
    def test_their_first_attestation_shows_on_the_next_request(self, client, registry, contributor, kind):
        run = _run()
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        assert _queries(client, run.get_absolute_url()) == NOTHING_FILED_RUN_PAGE_QUERIES
        data = {**REPRODUCTION, "kind": kind}
        assert client.post(reverse("attestations:attestation-create", args=[run.pk]), data).status_code == 302
        page = client.get(run.get_absolute_url())
        assert _own_attestation(page, Attestation.objects.get(author=contributor))
        assert _queries(client, run.get_absolute_url()) == CONTRIBUTOR_QUERIES["run page"]

    def test_their_first_issue_report_shows_on_the_next_request(self, client, registry, contributor):
        run = _run()
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        assert _queries(client, run.get_absolute_url()) == NOTHING_FILED_RUN_PAGE_QUERIES
        data = {"category": "wrong_environment", "description": "The driver version is not recorded."}
        assert client.post(reverse("attestations:report-create", args=[run.pk]), data).status_code == 302
        report = IssueReport.objects.get(reporter=contributor)
        assert f'id="own-report-{report.pk}"'.encode() in client.get(run.get_absolute_url()).content

    def test_a_result_file_uploaded_with_their_token_shows_on_their_signed_in_page(
        self, client, tmp_path, contributor
    ):
        csv_import(tmp_path / "runs.csv", small_cpu_rows(1))
        run = BenchmarkRun.objects.public().get(environment__slug="cpu")
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        assert _queries(client, run.get_absolute_url()) == NOTHING_FILED_RUN_PAGE_QUERIES
        token = services.api_token_regenerate(user=contributor).key
        response = Client().post(
            reverse("api-run-reproductions", args=[run.pk]),
            data=json.dumps(result_file(run)),
            content_type="application/json",
            headers={"authorization": f"Token {token}"},
        )
        assert response.status_code == 201, response.content
        assert _own_attestation(
            client.get(run.get_absolute_url()), Attestation.objects.get(author=contributor)
        )

    def test_with_the_marker_lost_a_pending_submission_still_shows(self, client, registry, contributor):
        run = _run()
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        note = submit_note(run, contributor)
        _filings_marker_clear(contributor)
        assert _own_attestation(client.get(run.get_absolute_url()), note)
        assert _own_attestation(client.get(run.get_absolute_url()), note)
        assert _queries(client, run.get_absolute_url()) == CONTRIBUTOR_QUERIES["run page"]

    def test_a_submission_on_another_run_is_not_taken_for_nothing_filed(self, client, registry, contributor):
        elsewhere = submit_note(_run("liger"), contributor)
        _filings_marker_clear(contributor)
        client.force_login(contributor)
        client.get(_run().get_absolute_url())  # nothing of theirs on this run
        assert _queries(client, _run().get_absolute_url()) == CONTRIBUTOR_QUERIES["run page"]
        assert _own_attestation(client.get(_run("liger").get_absolute_url()), elsewhere)

    def test_a_page_that_read_before_their_filing_committed_does_not_hide_it(
        self, client, registry, contributor, monkeypatch
    ):
        """The page's query finds nothing, the filing commits, then that page stores what it found."""
        run = _run()
        held_back = []
        remember = selectors._filed_nothing_remember
        monkeypatch.setattr(selectors, "_filed_nothing_remember", lambda user_pk: held_back.append(user_pk))
        client.force_login(contributor)
        client.get(run.get_absolute_url())
        monkeypatch.undo()
        note = submit_note(run, contributor)
        assert held_back == [contributor.pk]
        remember(*held_back)
        assert _own_attestation(client.get(run.get_absolute_url()), note)


@pytest.mark.django_db
class TestModeratorControls:
    def test_a_moderator_sees_the_runs_queues_and_a_contributor_does_not(
        self, client, registry, contributor, moderator
    ):
        run = _run()
        submit_note(run, contributor)
        client.force_login(contributor)
        assert b'class="moderation"' not in client.get(run.get_absolute_url()).content
        client.force_login(moderator)
        page = client.get(run.get_absolute_url())
        assert page[page_cache.SHARED_HEADER] == "hit"
        assert b'class="moderation"' in page.content
        assert b"1 pending reproduction or note" in page.content
        assert b"0 open issue reports" in page.content
        assert b"Request a rerun (admin)" in page.content
        client.logout()
        assert b'class="moderation"' not in client.get(run.get_absolute_url()).content

    def test_each_control_follows_its_own_permission_given_to_the_user_or_a_group(
        self, client, registry, contributor, django_user_model
    ):
        """The region reads the three permissions in one query: each must still be granted as
        Django grants it (to the user, or to a group of theirs; all to an active superuser)."""
        run = _run()
        submit_note(run, contributor)
        staff = django_user_model.objects.create_user("triager", "triager@example.org", is_staff=True)
        client.force_login(staff)
        assert b'class="moderation"' not in client.get(run.get_absolute_url()).content
        staff.user_permissions.add(Permission.objects.get(codename="triage_issuereport"))
        page = client.get(run.get_absolute_url()).content
        assert b"0 open issue reports" in page
        assert b"pending reproduction" not in page and b"Request a rerun (admin)" not in page
        group = Group.objects.create(name="rerunners")
        group.permissions.add(Permission.objects.get(codename="request_rerun"))
        staff.groups.add(group)
        page = client.get(run.get_absolute_url()).content
        assert b"Request a rerun (admin)" in page and b"pending reproduction" not in page
        boss = django_user_model.objects.create_superuser("boss", "boss@example.org", "x")
        client.force_login(boss)
        assert b"1 pending reproduction or note" in client.get(run.get_absolute_url()).content
        boss.is_active = False
        boss.save()
        staff.user_permissions.clear()
        staff.groups.clear()
        client.force_login(staff)
        assert b'class="moderation"' not in client.get(run.get_absolute_url()).content

    def test_the_controls_open_the_admin_on_this_run(self, client, registry, contributor, moderator):
        run, other = _run(), _run("liger")
        mine = submit_note(run, contributor)
        submit_note(other, contributor)
        client.force_login(moderator)
        page = client.get(run.get_absolute_url()).content.decode()
        links = re.findall(r'<aside class="moderation".*?</aside>', page, flags=re.DOTALL)[0]
        queue = re.search(r'href="([^"]*attestation/\?run__id__exact=\d+)"', links)[1].replace("&amp;", "&")
        response = client.get(queue)
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == [mine]
        for href in re.findall(r'href="([^"]+)"', links):
            assert client.get(href.replace("&amp;", "&")).status_code == 200


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.django_db
class TestSignedInQueryCountsStayConstant:
    @pytest.mark.parametrize("name", list(PAGES))
    def test_a_contributor_page_takes_the_same_queries_at_4_and_216_runs(
        self, client, import_rows, contributor, name
    ):
        import_rows(liger_rows(**SMALL))
        client.force_login(contributor)
        submit_note(_run(), contributor)
        url = PAGES[name]()
        miss_small = _queries(client, url)
        assert _queries(client, url) == CONTRIBUTOR_QUERIES[name]
        import_rows(liger_rows(**LARGE))
        assert BenchmarkRun.objects.count() == 216
        url = PAGES[name]()
        assert _queries(client, url) == miss_small
        assert _queries(client, url) == CONTRIBUTOR_QUERIES[name]

    def test_a_moderator_run_page_takes_the_same_queries_at_4_and_216_runs(
        self, client, import_rows, contributor, moderator
    ):
        import_rows(liger_rows(**SMALL))
        submit_note(_run(), contributor)
        client.force_login(moderator)
        client.get(_run().get_absolute_url())
        assert _queries(client, _run().get_absolute_url()) == MODERATOR_RUN_PAGE_QUERIES
        import_rows(liger_rows(**LARGE))
        client.get(_run().get_absolute_url())
        assert _queries(client, _run().get_absolute_url()) == MODERATOR_RUN_PAGE_QUERIES


@pytest.mark.django_db
class TestAPersonalisedHitRendersItsRegionsCheaply:
    def test_a_region_showing_what_it_showed_before_is_not_rendered_again(
        self, client, registry, moderator, monkeypatch
    ):
        url = _run().get_absolute_url()
        client.force_login(moderator)
        client.get(url)
        rendered = []
        render = DjangoTemplate.render
        monkeypatch.setattr(DjangoTemplate, "render", lambda *a, **k: rendered.append(1) or render(*a, **k))
        response = client.get(url)
        assert response[page_cache.SHARED_HEADER] == "hit"
        assert b"Sign out" in response.content and b"Moderation" in response.content
        assert rendered == []

    def test_a_region_showing_something_new_is_rendered_for_it(
        self, client, registry, contributor, moderator
    ):
        run = _run()
        client.force_login(moderator)
        assert b"0 pending reproductions or notes" in client.get(run.get_absolute_url()).content
        submit_note(run, contributor)
        page = client.get(run.get_absolute_url())
        assert page[page_cache.SHARED_HEADER] == "hit"
        assert b"1 pending reproduction or note" in page.content

    def test_plain_text_is_escaped_after_the_same_text_marked_safe_was_shown(self):
        shown = "<b>bold</b>"
        safe = page_cache.rendered_regions.html("messages", {"arg": "", "messages": (mark_safe(shown),)})
        plain = page_cache.rendered_regions.html("messages", {"arg": "", "messages": (shown,)})
        assert "<b>bold</b>" in safe and "&lt;b&gt;bold&lt;/b&gt;" in plain

    def test_their_links_are_not_reversed_again(self, client, registry, moderator, monkeypatch):
        url = _run().get_absolute_url()
        client.force_login(moderator)
        client.get(url)
        monkeypatch.setattr(site_tags, "reverse", lambda *a, **k: pytest.fail("reversed again"))
        response = client.get(url)
        assert response[page_cache.SHARED_HEADER] == "hit"
        assert reverse("account_logout").encode() in response.content
