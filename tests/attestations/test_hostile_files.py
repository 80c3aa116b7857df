"""Hostile result files (issue 36, findings 1, 4 and 6): whatever the bytes, an upload through the API
or the form is either a 400 that stored nothing, or a 201 whose pages all render. Every stored figure
is finite and physically possible, every string free of NUL and lone surrogates, and nesting depth and
integer size are bounded before the JSON is parsed. The properties at the end generate such files
with hypothesis; run them on PostgreSQL (DATABASE_URL) to exercise its JSON and text types."""

import hashlib
import importlib
import json

import pytest
from django.apps import apps as django_apps
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attestations.models import Attestation, AuditEntry
from tests.attestations.test_data_reproductions import cpu_runs, result_file, run, token, upload  # noqa: F401

pytestmark = pytest.mark.django_db


def signed_bytes(document: dict, **raw_fields) -> bytes:
    """The file as bytes with `raw_fields` spliced in as raw JSON text (compact, as canonical JSON
    writes it), its digest taken over the spliced canonical text: values Python's json cannot
    write (1e400, a lone surrogate escape, 5,000 digits, 5,000 brackets) reach the server byte for
    byte, under a digest that matches them."""
    placeholders = {name: f"@@{name}@@" for name in raw_fields}
    document = {key: value for key, value in {**document, **placeholders}.items() if key != "digest"}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = json.dumps(document)
    for name, raw in raw_fields.items():
        canonical = canonical.replace(json.dumps(placeholders[name]), raw)
        text = text.replace(json.dumps(placeholders[name]), raw)
    stated = "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return (text[:-1] + f', "digest": "{stated}"}}').encode()


def nothing_stored():
    return not Attestation.objects.exists() and not AuditEntry.objects.exists()


def form_upload(client, target, content: bytes):
    return client.post(
        reverse("attestations:attestation-create", args=[target.pk]),
        {"kind": "reproduction", "file": SimpleUploadedFile("r.json", content)},
    )


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = {
    "upstream of 1e308": lambda r: result_file(r, upstream={"median": 1e308, "p20": 1e308, "p80": 1.5e308}),
    "a sample of 5e-324 ms": lambda r: result_file(r, samples=[5e-324] + result_file(r)["samples"][1:]),
    "a sample under a nanosecond": lambda r: result_file(r, samples=[5e-7] + result_file(r)["samples"][1:]),
    "NUL in the environment": lambda r: result_file(
        r, environment={**result_file(r)["environment"], "cpu": "AMD\x00EPYC"}
    ),
    "NUL in the GPU state": lambda r: result_file(r, gpuState={"before": {"clock": "x\x00"}}),
    "NUL in the sampling": lambda r: result_file(r, sampling={"stop": "precision\x00"}),
    "NUL in the kit version": lambda r: result_file(r, kit={**result_file(r)["kit"], "version": "0.1\x00"}),
    "NUL in a date": lambda r: result_file(r, startedAt="2026-12-01T00:00:00Z\x00"),
    "a NUL key": lambda r: result_file(r, gpuState={"a\x00b": 1}),
    "a huge number in the GPU state": lambda r: result_file(r, gpuState={"power": 1e308}),
}
RAW = {
    "a sample written 1e400": lambda r: signed_bytes(result_file(r), sampling='{"timing_s":1e400}'),
    "an integer of 4,300 digits": lambda r: signed_bytes(result_file(r), gpuState='{"n":' + "9" * 4300 + "}"),
    "an integer of 5,000 digits": lambda r: signed_bytes(result_file(r), gpuState='{"n":' + "9" * 5000 + "}"),
    "arrays nested 5,000 deep": lambda r: signed_bytes(result_file(r), gpuState='{"n":' + deep(5000) + "}"),
    "a lone surrogate": lambda r: signed_bytes(result_file(r), startedAt='"\\ud800"'),
    "a lone surrogate key": lambda r: signed_bytes(result_file(r), gpuState='{"\\udfff":1}'),
    "2**60 in the spec": lambda r: signed_bytes(
        result_file(r),
        spec=json.dumps({**result_file(r)["spec"], "x": 2**60}, sort_keys=True, separators=(",", ":")),
    ),
}


def hostile_bytes(name, target) -> bytes:
    if name in RAW:
        return RAW[name](target)
    return json.dumps(HOSTILE[name](target)).encode()


@pytest.mark.parametrize("name", [*HOSTILE, *RAW])
class TestAHostileFileIsRefusedAndStoresNothing:
    def test_through_the_api(self, client, run, token, name):  # noqa: F811
        response = upload(client, run, hostile_bytes(name, run), token)

        assert response.status_code == 400, response.content[:500]
        assert response.json()["file"][0]
        assert nothing_stored()

    def test_through_the_form(self, contributor_client, run, name):  # noqa: F811
        response = form_upload(contributor_client, run, hostile_bytes(name, run))

        assert response.status_code == 200  # the form again, with the reason
        assert b"errorlist" in response.content
        assert nothing_stored()


class TestTheReasonsNameWhatIsWrong:
    def test_an_absurd_upstream_median_names_its_bound(self, client, run, token):  # noqa: F811
        reason = upload(client, run, hostile_bytes("upstream of 1e308", run), token).json()["file"][0]
        assert reason.startswith("upstream.median:") and "bound" in reason

    def test_a_sample_under_a_nanosecond_names_the_floor(self, client, run, token):  # noqa: F811
        reason = upload(client, run, hostile_bytes("a sample under a nanosecond", run), token).json()["file"][
            0
        ]
        assert reason.startswith("samples[0]:") and "nanosecond" in reason

    def test_depth_is_refused_before_parsing(self, client, run, token):  # noqa: F811
        reason = upload(client, run, hostile_bytes("arrays nested 5,000 deep", run), token).json()["file"][0]
        assert "nested" in reason

    def test_a_long_integer_is_refused_before_parsing(self, client, run, token):  # noqa: F811
        reason = upload(client, run, hostile_bytes("an integer of 4,300 digits", run), token).json()["file"][
            0
        ]
        assert "digits" in reason

    def test_an_integer_outside_the_canonical_domain_names_it(self, client, run, token):  # noqa: F811
        reason = upload(client, run, hostile_bytes("2**60 in the spec", run), token).json()["file"][0]
        assert "2**53" in reason


# --- properties ---------------------------------------------------------------------------------

TEXT = st.text(st.one_of(st.characters(), st.sampled_from(["\x00", "\ud800", "\udfff"])), max_size=12)
NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([5e-324, 1e-9, 1e308, -0.0, 0]),
)
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
FIELDS_CHANGED = st.dictionaries(
    st.sampled_from(
        [
            "upstream",
            "sampling",
            "environment",
            "gpuState",
            "kit",
            "startedAt",
            "finishedAt",
            "gpuUuid",
            "device",
        ]
    ),
    VALUES,
    max_size=3,
)
PLAUSIBLE = st.floats(min_value=1e-5, max_value=1e5)
SAMPLE_VALUES = st.one_of(
    *[st.lists(PLAUSIBLE, min_size=10, max_size=30)] * 3,
    st.lists(
        st.one_of(
            PLAUSIBLE, st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([5e-324, 1e308])
        ),
        min_size=10,
        max_size=30,
    ),
)
UPSTREAM = st.one_of(
    st.just({}),
    st.lists(PLAUSIBLE, min_size=3, max_size=3).map(
        lambda v: dict(zip(("p20", "median", "p80"), sorted(v), strict=True))
    ),
    st.fixed_dictionaries({name: st.one_of(PLAUSIBLE, NUMBERS) for name in ("median", "p20", "p80")}).map(
        lambda figures: dict(zip(("p20", "median", "p80"), sorted(figures.values()), strict=True))
        if all(isinstance(v, float) for v in figures.values())
        else figures
    ),
    st.dictionaries(st.sampled_from(["median", "p20", "p80", "mean"]), NUMBERS),
)


def page_statuses(client, attestation) -> dict[str, int]:
    """The status of every page and API view that shows the attestation, by URL."""
    urls = (
        reverse("attestations:attestation-detail", args=[attestation.pk]),
        reverse("attestations:my-submissions"),
        reverse("attestations:run-attestations", args=[attestation.run_id]),
        f"/api/v1/attestations/{attestation.pk}/",
        "/api/v1/attestations/",
    )
    return {url: client.get(url).status_code for url in urls}


def pages_render(client, attestation) -> None:
    statuses = page_statuses(client, attestation)
    assert set(statuses.values()) == {200}, statuses


def file_bytes(target, **changes) -> bytes:
    """result_file's bytes, its digest taken as the kit would even over lone surrogates."""
    document = result_file(target)
    document.update(changes)
    body = {key: value for key, value in document.items() if key != "digest"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    document["digest"] = "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return json.dumps(document).encode()


def upload_outcome(client, run, token, content, contributor) -> tuple[int, int, set[int]]:  # noqa: F811
    """Upload `content` and say what became of it: the status, how many rows (attestations and
    audit entries) it stored, and the statuses of the pages that show what it stored (a repeat of
    an earlier example is a 400 duplicate)."""
    cache.clear()  # the per-user submission limit counts in the cache
    before = Attestation.objects.count() + AuditEntry.objects.count()
    response = upload(client, run, content, token)
    event(f"status {response.status_code}")
    stored = Attestation.objects.count() + AuditEntry.objects.count() - before
    if response.status_code != 201:
        return response.status_code, stored, set()
    client.force_login(contributor)
    filed = Attestation.objects.get(pk=response.json()["id"])
    return response.status_code, stored, set(page_statuses(client, filed).values())


class TestEveryGeneratedFileIsRefusedOrRenders:
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(changes=FIELDS_CHANGED)
    def test_any_descriptive_field(self, client, run, token, contributor, changes):  # noqa: F811
        status, stored, pages = upload_outcome(client, run, token, file_bytes(run, **changes), contributor)

        assert (status, stored, pages) in [(400, 0, set()), (201, 2, {200})], (status, stored, pages)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(samples=SAMPLE_VALUES, upstream=UPSTREAM)
    def test_any_samples_and_upstream_figures(self, client, run, token, contributor, samples, upstream):  # noqa: F811
        content = file_bytes(run, samples=samples, upstream=upstream)
        status, stored, pages = upload_outcome(client, run, token, content, contributor)

        assert (status, stored, pages) in [(400, 0, set()), (201, 2, {200})], (status, stored, pages)


class TestNothingCanFailAfterTheCommit:
    def test_a_figure_json_cannot_carry_is_refused_before_anything_is_written(
        self,
        client,
        run,  # noqa: F811
        token,  # noqa: F811
        monkeypatch,
    ):
        """The bounds keep every deviation finite; should a judgement ever give an infinite one, the
        service serializes first and refuses, rather than commit a row whose pages fail."""
        from attestations import services

        monkeypatch.setattr(services, "_file_verdict", lambda *a: {"deviation": float("inf")})

        response = upload(client, run, result_file(run), token)

        assert response.status_code == 400
        assert "deviation" in response.json()["file"][0]
        assert nothing_stored()


MIGRATION = importlib.import_module("attestations.migrations.0005_repair_infinite_deviations")


class TestADeviationAlreadyStoredAsInfiniteIsRepaired:
    def test_the_migration_takes_the_verdict_off_and_every_page_renders_again(
        self,
        client,
        run,  # noqa: F811
        token,  # noqa: F811
        contributor,
        moderator,
    ):
        from attestations import services

        assert upload(client, run, result_file(run), token).status_code == 201
        filed = Attestation.objects.get()
        services.attestation_approve(attestation=filed, moderator=moderator)
        inf = float("inf")
        Attestation.objects.filter(pk=filed.pk).update(  # as the unbounded upload left it
            verdict="disagrees", deviation=inf, deviation_low=inf, deviation_high=inf
        )

        MIGRATION.infinite_deviations_repair(django_apps, None)

        filed.refresh_from_db()
        assert (filed.verdict, filed.deviation, filed.deviation_low, filed.deviation_high) == (
            "",
            None,
            None,
            None,
        )
        assert filed.verdict_note.startswith("Not judged")
        assert filed.median is not None  # its own figures, from its samples, stay
        client.force_login(contributor)
        pages_render(client, filed)
        assert client.get(f"/api/v1/runs/{run.pk}/attestations/").status_code == 200
