"""Hypothesis on the contributor forms: random and mutated posts to the attestation and issue
report forms give a clean error (the form again) or a clean save (a redirect, one new row and
its one audit entry), never a traceback and never a partial write."""

import os

import pytest
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attestations.models import Attestation, AuditEntry, IssueReport
from tests.attestations.conftest import REPRODUCTION

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("KERNELINDEX_FORM_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text a browser can send: any code point but lone surrogates (not encodable as UTF-8).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
NASTY = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "a\x00b",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "1e309",
        "-1",
        "0",
        "1e-320",
        "１２３",  # full-width digits
        "9" * 400,
        "x" * 6000,
        "<script>alert(1)</script>",
        "javascript:alert(1)",
        "https://example.org/" + "a" * 600,
        "https://example.org/a\nhttps://example.org/b\nhttps://example.org/c\nhttps://example.org/d",
        "http://[::1",
        "ms",
        "MB",
        "reproduction",
        "note",
        "wrong_value",
        "\u202egnp.exe",
        "\r\n\r\n",
    ]
)
VALUE = st.one_of(TEXT, NASTY, st.lists(st.one_of(TEXT, NASTY), min_size=2, max_size=3))
ATTESTATION_FIELDS = list(REPRODUCTION)
REPORT = {"category": "wrong_value", "description": "The p80 is lower than the median."}


def mutated(base: dict) -> st.SearchStrategy[dict]:
    """The valid post with one to three fields replaced, removed, or joined by a stray one."""
    fields = list(base)
    change = st.dictionaries(st.sampled_from(fields), VALUE, min_size=1, max_size=3)
    drop = st.lists(st.sampled_from(fields), max_size=2)
    extra = st.dictionaries(
        st.sampled_from(["evidence_level", "state", "author", "run", "csrfmiddlewaretoken"]),
        VALUE,
        max_size=1,
    )
    return st.builds(
        lambda c, d, e: {k: v for k, v in {**base, **c, **e}.items() if k not in d},
        change,
        drop,
        extra,
    )


def random_post(fields: list[str]) -> st.SearchStrategy[dict]:
    return st.dictionaries(st.one_of(st.sampled_from(fields), TEXT), VALUE, max_size=len(fields) + 2)


@pytest.fixture
def poster(world, settings):
    """The other contributor, logged in; the rate limit off, so only the form decides."""
    settings.ATTESTATIONS_SUBMISSION_LIMITS = {}
    return world.client("other")


def audit_count(model) -> int:
    return AuditEntry.objects.filter(content_type=ContentType.objects.get_for_model(model)).count()


def assert_clean(response, model, before_rows: int, before_audit: int):
    """Either the form again with its errors and nothing written, or exactly one row and its one
    audit entry, and a redirect to the contributor's submissions."""
    rows, audit = model.objects.count(), audit_count(model)
    if response.status_code == 302:
        assert response["Location"] == reverse("attestations:my-submissions")
        assert (rows, audit) == (before_rows + 1, before_audit + 1)
    else:
        assert response.status_code == 200
        form = response.context["form"]
        assert form.errors or not form.is_bound  # an empty POST is the blank form again
        assert (rows, audit) == (before_rows, before_audit)


def post_and_check(client, url, data, model):
    before = model.objects.count(), audit_count(model)
    response = client.post(url, data)
    assert_clean(response, model, *before)
    return response


class TestTheAttestationForm:
    @FUZZ
    @given(data=mutated(REPRODUCTION))
    def test_mutated_reproductions(self, poster, world, data):
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        assert post_and_check(poster, url, data, Attestation).status_code in (200, 302)

    @FUZZ
    @given(data=random_post(ATTESTATION_FIELDS))
    def test_random_posts(self, poster, world, data):
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        assert post_and_check(poster, url, data, Attestation).status_code in (200, 302)

    def test_the_valid_post_saves(self, poster, world):
        url = reverse("attestations:attestation-create", args=[world.run.pk])
        assert post_and_check(poster, url, REPRODUCTION, Attestation).status_code == 302


class TestTheIssueReportForm:
    @FUZZ
    @given(data=mutated(REPORT))
    def test_mutated_reports(self, poster, world, data):
        url = reverse("attestations:report-create", args=[world.run.pk])
        assert post_and_check(poster, url, data, IssueReport).status_code in (200, 302)

    @FUZZ
    @given(data=random_post(list(REPORT)))
    def test_random_posts(self, poster, world, data):
        url = reverse("attestations:report-create", args=[world.run.pk])
        assert post_and_check(poster, url, data, IssueReport).status_code in (200, 302)

    def test_the_valid_post_saves(self, poster, world):
        url = reverse("attestations:report-create", args=[world.run.pk])
        assert post_and_check(poster, url, REPORT, IssueReport).status_code == 302
