"""The page cache (registry/cache.py): an anonymous visitor's second request for a page is served
from the cache without a query; every state-changing service makes the next request show the
change; no page rendered for someone with a session, and no response that carries something of
its visitor's, is ever stored or served (signed-in visitors get the stored page personalised:
test_signed_in_cache.py)."""

from pathlib import Path

import pytest
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.test import RequestFactory
from django.urls import reverse
from rest_framework.throttling import AnonRateThrottle

from attestations import services as attestation_services
from registry import cache as page_cache
from registry.models import BenchmarkRun, EvidenceLevel
from registry.reruns.services import job_claim, rerun_record_result, rerun_request
from tests.reruns.conftest import harness_result
from tests.site.conftest import liger_rows
from tests.site.test_query_counts import PAGES, _run

SMALL = {"providers": ("liger", "huggingface"), "gpus": 1, "xs": (1024, 2048), "modes": ("backward",)}
NOT_STORED = {"BibTeX", "CSL-JSON", "CSV export", "JSON Lines export"}  # downloads: never cached
CACHED = [name for name in PAGES if name not in NOT_STORED]


@pytest.fixture
def registry(import_rows):
    import_rows(liger_rows(**SMALL))
    return BenchmarkRun.objects.all()


@pytest.mark.django_db
class TestASecondAnonymousRequestIsServedFromTheCache:
    @pytest.mark.parametrize("name", CACHED)
    def test_the_second_get_runs_no_query_and_returns_the_same_bytes(
        self, client, registry, django_assert_num_queries, name
    ):
        url = PAGES[name]()
        first = client.get(url)
        assert first.status_code == 200
        assert first[page_cache.HIT_HEADER] == "miss"
        with django_assert_num_queries(0):
            second = client.get(url)
        assert second.status_code == 200
        assert second[page_cache.HIT_HEADER] == "hit"
        assert second.content == first.content
        assert second["Content-Type"] == first["Content-Type"]

    def test_a_hit_still_goes_through_the_security_middleware(self, client, registry):
        url = reverse("registry:kernel-detail", args=["geglu"])
        client.get(url)
        hit = client.get(url)
        assert hit[page_cache.HIT_HEADER] == "hit"
        assert hit["X-Frame-Options"] == "DENY"
        assert "Content-Security-Policy" in hit

    def test_head_is_answered_from_what_a_get_stored(self, client, registry, django_assert_num_queries):
        url = reverse("registry:kernel-detail", args=["geglu"])
        client.get(url)
        with django_assert_num_queries(0):
            response = client.head(url)
        assert response.status_code == 200
        assert response[page_cache.HIT_HEADER] == "hit"

    def test_each_query_string_is_a_page_of_its_own(self, client, registry):
        url = reverse("run-list")
        client.get(url, {"kernel": "geglu"})
        other = client.get(url, {"kernel": "swiglu"})
        assert other[page_cache.HIT_HEADER] == "miss"
        assert other.json()["count"] == 0

    def test_the_api_keys_on_the_negotiated_format(self, client, registry):
        url = reverse("run-list") + "?kernel=geglu"
        client.get(url, headers={"accept": "application/json"})
        browsable = client.get(url, headers={"accept": "text/html"})
        assert browsable["Content-Type"].startswith("text/html")
        assert browsable.get(page_cache.HIT_HEADER) is None  # the browsable API is never stored

    def test_a_cached_api_response_still_counts_against_the_anonymous_throttle(
        self, client, registry, monkeypatch
    ):
        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "2/minute"})
        url = reverse("run-list") + "?kernel=geglu"
        codes = [client.get(url).status_code for _ in range(3)]
        assert codes == [200, 200, 429]

    def test_a_hit_answers_304_to_a_matching_etag(self, client, registry, django_assert_num_queries):
        url = reverse("run-detail", args=[_run().pk])
        etag = client.get(url)["ETag"]
        with django_assert_num_queries(0):
            response = client.get(url, headers={"if-none-match": etag})
        assert response.status_code == 304

    def test_zero_seconds_turns_the_cache_off(self, client, registry, settings):
        settings.PAGE_CACHE_SECONDS = 0
        url = reverse("registry:kernel-detail", args=["geglu"])
        client.get(url)
        assert page_cache.HIT_HEADER not in client.get(url)


@pytest.mark.django_db
class TestEveryChangeIsShownOnTheNextRequest:
    def test_an_import_of_a_changed_csv(self, client, registry, import_rows):
        kernel_page = reverse("registry:kernel-detail", args=["geglu"])
        api = reverse("run-list") + "?kernel=geglu"
        assert b"4 runs." in client.get(kernel_page).content
        assert client.get(api).json()["count"] == 4
        summary = import_rows(liger_rows(**{**SMALL, "xs": (1024, 2048, 3072)}))
        assert summary.created == 2
        assert b"6 runs." in client.get(kernel_page).content
        assert client.get(api).json()["count"] == 6

    def test_a_superseding_import_changes_the_run_page(self, client, registry, import_rows):
        run = _run()
        assert b"superseded" not in client.get(run.get_absolute_url()).content.lower()
        rows = liger_rows(**SMALL)
        for row in rows:
            row["timestamp"], row["liger_version"] = "2025-01-01 00:00:00", "0.3.0"
        import_rows(rows)
        run.refresh_from_db()
        assert run.superseded_by_id is not None
        assert b"superseded" in client.get(run.get_absolute_url()).content.lower()

    def test_an_attestation_approval(self, client, registry, django_user_model):
        run = _run()
        author = django_user_model.objects.create_user("ada", "ada@example.org", "pw")
        moderator = django_user_model.objects.create_superuser("mod", "mod@example.org", "pw")
        attestation = attestation_services.attestation_submit(
            author=author, run=run, kind="note", text="Same figure on our A100, driver 550."
        )
        assert b"Same figure on our A100" not in client.get(run.get_absolute_url()).content
        assert b"Same figure on our A100" not in client.get(run.get_absolute_url()).content  # a hit
        attestation_services.attestation_approve(attestation=attestation, moderator=moderator)
        assert b"Same figure on our A100" in client.get(run.get_absolute_url()).content
        attestation_services.attestation_reject(
            attestation=attestation, moderator=moderator, reason="Taken down: duplicate."
        )
        assert b"Same figure on our A100" not in client.get(run.get_absolute_url()).content

    def test_a_rerun_result(self, client, registry, settings):
        # These runs publish a p20–p80 of ±2%, which no rerun can settle within the default ±2%:
        # a wider tolerance lets this one agree, so that its new level must show at once.
        settings.RERUN_TOLERANCE = 0.05
        run = BenchmarkRun.objects.select_related("implementation", "environment").get(pk=_run().pk)
        api = reverse("run-detail", args=[run.pk])
        assert client.get(api).json()["evidence_level"] == EvidenceLevel.REPORTED
        job = rerun_request(run=run)
        claim = job_claim(job_id=job.pk, gpu_slug=run.environment.slug, worker_host="worker-1")
        result = harness_result(run.median, gpu_slug=run.environment.slug)
        assert client.get(api).json()["evidence_level"] == EvidenceLevel.REPORTED
        rerun_record_result(job_id=job.pk, lease=claim.lease, result=result)
        assert client.get(api).json()["evidence_level"] == EvidenceLevel.REPRODUCED
        assert b"reproduced" in client.get(run.get_absolute_url()).content

    def test_an_admin_save_of_a_kernel(self, client, admin_client, registry):
        # Published runs are read-only in the admin; a kernel's name is not, and its runs show it.
        run = _run()
        assert b"GeGLU MLP (renamed)" not in client.get(run.get_absolute_url()).content
        change = reverse("admin:registry_kernel_change", args=[run.kernel_id])
        data = _admin_form_data(admin_client.get(change))
        data["name"] = "GeGLU MLP (renamed)"
        assert admin_client.post(change, data).status_code == 302
        assert b"GeGLU MLP (renamed)" in client.get(run.get_absolute_url()).content


def _admin_form_data(response) -> dict:
    """The change form's current values, as a browser would post them back."""
    form = response.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(field.widget, forms.MultiWidget):
            for i, part in enumerate(field.widget.decompress(value)):
                data[f"{name}_{i}"] = "" if part is None else part
        elif isinstance(value, bool):
            if value:
                data[name] = "on"
        else:
            data[name] = "" if value is None else value
    return data


@pytest.mark.django_db
class TestNobodyWithASessionGetsAStoredPage:
    def test_a_signed_in_user_never_gets_the_anonymous_copy(self, client, registry, django_user_model):
        url = reverse("registry:home")
        client.get(url)
        assert client.get(url)[page_cache.HIT_HEADER] == "hit"
        user = django_user_model.objects.create_user("ada", "ada@example.org", "pw")
        client.force_login(user)
        response = client.get(url)
        assert page_cache.HIT_HEADER not in response
        assert b"Account (ada)" in response.content

    def test_a_signed_in_users_page_is_never_stored(self, client, registry, django_user_model):
        """What a signed-in request stores is the page rendered for an anonymous visitor
        (tests/site/test_signed_in_cache.py), never theirs."""
        url = reverse("registry:home")
        client.force_login(django_user_model.objects.create_user("ada", "ada@example.org", "pw"))
        client.get(url)
        client.logout()
        response = client.get(url)
        assert b"Sign out" not in response.content
        assert b"Account (ada)" not in response.content

    def test_a_request_with_a_session_cookie_is_rendered(self, client, registry):
        url = reverse("registry:kernel-detail", args=["geglu"])
        client.get(url)
        client.cookies["sessionid"] = "anything"
        assert page_cache.HIT_HEADER not in client.get(url)

    def test_an_api_request_with_a_token_gets_the_same_bytes_as_everyone(
        self, client, registry, django_user_model
    ):
        """The read API's bodies do not depend on who asks, so they are shared."""
        from rest_framework.authtoken.models import Token

        url = reverse("run-list") + "?kernel=geglu"
        anonymous = client.get(url)
        token = Token.objects.create(user=django_user_model.objects.create_user("ada", "a@example.org", "pw"))
        response = client.get(url, headers={"authorization": f"Token {token.key}"})
        assert response.status_code == 200
        assert response[page_cache.HIT_HEADER] == "hit"
        assert response.content == anonymous.content


class TestWhatIsNeverStored:
    """Straight through the decorator: a response carrying something of its visitor's."""

    def _get(self, view):
        request = RequestFactory().get("/a-page/")
        request.user = AnonymousUser()
        return page_cache.cached_page(view)(request)

    def _count_calls(self, respond):
        calls = []

        def view(request):
            calls.append(1)
            return respond(request)

        return view, calls

    def test_a_page_that_set_a_cookie(self):
        def respond(request):
            response = HttpResponse("hello")
            response.set_cookie("seen", "1")
            return response

        view, calls = self._count_calls(respond)
        self._get(view), self._get(view)
        assert len(calls) == 2

    def test_a_page_that_used_the_csrf_token(self):
        view, calls = self._count_calls(lambda request: HttpResponse(get_token(request)))
        self._get(view), self._get(view)
        assert len(calls) == 2

    def test_an_error_page(self):
        view, calls = self._count_calls(lambda request: HttpResponse("no", status=404))
        self._get(view), self._get(view)
        assert len(calls) == 2

    def test_a_private_page(self):
        def respond(request):
            response = HttpResponse("mine")
            response["Cache-Control"] = "private"
            return response

        view, calls = self._count_calls(respond)
        self._get(view), self._get(view)
        assert len(calls) == 2

    def test_a_plain_page_is_stored(self):
        view, calls = self._count_calls(lambda request: HttpResponse("public"))
        assert self._get(view).content == b"public"
        assert self._get(view).content == b"public"
        assert len(calls) == 1


@pytest.mark.django_db
class TestTheGeneration:
    def test_it_moves_again_after_the_commit(self, django_capture_on_commit_callbacks):
        before = page_cache.generation()
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            page_cache.generation_bump()
            page_cache.generation_bump()
        assert page_cache.generation() == before + 2
        assert len(callbacks) == 1  # one after-commit bump, however many writes
        callbacks[0]()
        assert page_cache.generation() == before + 3

    def test_a_cleared_cache_never_brings_back_an_old_generation(self):
        first = page_cache.generation()
        page_cache.cache.clear()
        assert page_cache.generation() > first

    def test_env_example_names_the_setting(self):
        example = Path(__file__).resolve().parents[2] / ".env.example"
        assert "PAGE_CACHE_SECONDS=" in example.read_text()
