"""Unknown ids and digests are 404s, bad filter values are 400s naming the parameter, and no
query string at all makes a 500."""

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.models import BenchmarkRun
from tests.site.conftest import liger_rows

UNKNOWN_DIGEST = "sha256:" + "0" * 64


@pytest.fixture
def registry(import_rows):
    import_rows(liger_rows())
    return BenchmarkRun.objects.order_by("pk").first()


@pytest.mark.django_db
class TestUnknownThingsAreNotFound:
    @pytest.mark.parametrize(
        "url",
        [
            reverse("registry:run-detail", args=[999999]),
            reverse("registry:run-by-digest", args=[UNKNOWN_DIGEST]),
            reverse("registry:run-compare-best", args=[999999]),
            reverse("registry:compare", args=[999999, 999998]),
            reverse("registry:run-cite-bibtex", args=[999999]),
            reverse("registry:run-cite-csl", args=[999999]),
            reverse("registry:kernel-detail", args=["no-such-kernel"]),
            reverse("registry:gpu-detail", args=["no-such-gpu"]),
            reverse("registry:implementation-detail", args=["no-such-provider"]),
            reverse("registry:source-detail", args=["no-such-source"]),
            "/runs/99999999999999999999999999/",
            "/runs/sha256:nothex/",
        ],
    )
    def test_site_answers_404(self, client, registry, url):
        response = client.get(url)
        assert response.status_code == 404

    @pytest.mark.parametrize(
        "url",
        [
            reverse("run-detail", args=[999999]),
            reverse("run-manifest", args=[999999]),
            reverse("manifest-detail", args=[UNKNOWN_DIGEST]),
            reverse("comparison-group-detail", args=[UNKNOWN_DIGEST]),
            reverse("kernel-detail", args=["no-such-kernel"]),
            reverse("source-detail", args=["no-such-source"]),
            reverse("implementation-detail", args=[999999]),
            reverse("environment-detail", args=[999999]),
            "/api/v1/runs/99999999999999999999999/",
            "/api/v1/manifests/sha256:abc/",
        ],
    )
    def test_api_answers_404(self, client, registry, url):
        response = client.get(url)
        assert response.status_code == 404

    def test_a_run_alone_in_its_group_has_nothing_to_compare_with(self, client, import_rows):
        import_rows(liger_rows(providers=("liger",), xs=(1024,), modes=("forward",)))
        run = BenchmarkRun.objects.get()
        response = client.get(reverse("registry:run-compare-best", args=[run.pk]))
        assert response.status_code == 404
        page = client.get(run.get_absolute_url())
        assert "This run is alone in its comparison group." in page.content.decode()


@pytest.mark.django_db
class TestBadFilterValuesAreRefused:
    @pytest.mark.parametrize(
        "params, field, message",
        [
            ({"withdrawn": "maybe"}, "withdrawn", "is not a boolean"),
            ({"current": "2"}, "current", "is not a boolean"),
            ({"metric": "speed"}, "metric", "Select a valid choice"),
            ({"operation_mode": "sideways"}, "operation_mode", "Select a valid choice"),
            ({"evidence_level": "rumoured"}, "evidence_level", "Select a valid choice"),
            ({"sort": "price"}, "sort", "Select a valid choice"),
            ({"observed_after": "last tuesday"}, "observed_after", "valid date"),
            ({"param": "T"}, "param", "write name:value"),
            ({"param": "1bad:3"}, "param", "write name:value"),
            ({"page": "abc"}, "page", "is not a page number"),
            ({"page_size": "100000"}, "page_size", "from 1 to 500"),
            # Digits to str.isdigit(), not to int() (schemathesis found it).
            ({"page_size": "²"}, "page_size", "from 1 to 500"),
            ({"page": "²"}, "page", "is not a page number"),
            # A whole number is digits: Django's IntegerField alone takes "406.0" (schemathesis).
            ({"pull_request": "1000000000.0"}, "pull_request", "Enter a whole number"),
            ({"pull_request": " 406"}, "pull_request", "Enter a whole number"),
        ],
    )
    def test_api_answers_400_naming_the_parameter(self, client, registry, params, field, message):
        response = client.get(reverse("run-list"), params)
        assert response.status_code == 400
        body = response.json()
        assert field in body
        assert message in " ".join(body[field])

    @pytest.mark.parametrize(
        ("url", "field"),
        [("/api/v1/changes/", "pull_request"), ("/api/v1/changes/", "series"), ("/api/v1/jobs/", "run")],
    )
    def test_every_whole_number_filter_takes_digits_only(self, client, registry, url, field):
        assert client.get(url, {field: "7"}).status_code == 200
        response = client.get(url, {field: "7.0"})
        assert response.status_code == 400
        assert "Enter a whole number" in " ".join(response.json()[field])

    def test_a_nul_byte_is_refused_not_sent_to_the_database(self, client, registry):
        response = client.get(reverse("run-list"), {"external_id": "a\x00b"})
        assert response.status_code == 400
        assert "NUL" in response.content.decode() or "Null" in response.content.decode()

    @pytest.mark.parametrize("url", [reverse("export-csv"), reverse("export-jsonl")])
    def test_export_refuses_bad_filters_before_streaming(self, client, registry, url):
        response = client.get(url, {"metric": "speed"})
        assert response.status_code == 400
        assert not response.streaming
        assert "metric" in response.json()

    def test_kernel_page_answers_400_and_says_which_filter_is_wrong(self, client, registry):
        response = client.get(reverse("registry:kernel-detail", args=["geglu"]), {"withdrawn": "maybe"})
        assert response.status_code == 400
        body = response.content.decode()
        assert "<code>withdrawn</code>: &#x27;maybe&#x27; is not a boolean; use true or false." in body
        assert response.context["page"] is None

    def test_run_list_answers_400_for_a_bad_parameter_filter(self, client, registry):
        response = client.get(reverse("registry:run-list"), {"param": "T"})
        assert response.status_code == 400
        assert "write name:value" in response.content.decode()

    def test_compare_form_answers_400_for_unknown_runs(self, client, registry):
        response = client.get(reverse("registry:compare-form"), {"a": "nothing", "b": str(registry.pk)})
        assert response.status_code == 400

    def test_compare_form_finds_runs_by_digest_and_external_id(self, client, registry):
        other = BenchmarkRun.objects.exclude(pk=registry.pk).first()
        response = client.get(
            reverse("registry:compare-form"), {"a": registry.digest, "b": other.external_id}
        )
        assert response.status_code == 302
        assert response["Location"] == reverse("registry:compare", args=[registry.pk, other.pk])


# Query strings built from the names the filters know and arbitrary values, plus arbitrary names.
NAMES = st.sampled_from(
    [
        "kernel",
        "implementation",
        "project",
        "gpu",
        "operation_mode",
        "metric",
        "dtype",
        "param",
        "evidence_level",
        "withdrawn",
        "current",
        "observed_after",
        "observed_before",
        "external_id",
        "digest",
        "comparison_key",
        "sort",
        "page",
        "page_size",
        "q",
        "a",
        "b",
        "format",
    ]
) | st.text(min_size=1, max_size=12)
VALUES = st.text(max_size=40) | st.sampled_from(
    ["T:", ":", "T:1e999", "nan", "-1", "0", "9" * 30, "last", "x:y:z"]
)
QUERIES = st.lists(st.tuples(NAMES, VALUES), max_size=5)
FUZZED = [
    reverse("registry:kernel-detail", args=["geglu"]),
    reverse("registry:run-list"),
    reverse("registry:search"),
    reverse("registry:compare-form"),
    reverse("registry:home"),
    reverse("run-list"),
    reverse("comparison-group-list"),
    reverse("implementation-list"),
    reverse("export-csv"),
]


@pytest.mark.django_db
class TestNoQueryStringMakesA500:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(url=st.sampled_from(FUZZED), query=QUERIES)
    def test_any_query_string_is_answered_without_a_server_error(self, registry, url, query):
        from django.core.cache import cache

        cache.clear()  # the throttle would otherwise answer 429 to a long run of examples
        client = Client(raise_request_exception=False)
        response = client.get(url, query)
        if response.streaming:
            b"".join(response.streaming_content)
        assert response.status_code in {200, 302, 400, 404}, (url, query, response.status_code)
