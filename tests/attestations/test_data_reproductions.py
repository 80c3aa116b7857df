"""Reproductions that carry their data: a result file is checked on arrival and refused, storing
nothing, when any check fails; the figures, interval and verdict are KernelIndex's, from its
samples; typed reproductions stay, marked as typed; moderators turn a disagreeing one into a rerun.
The files are built here as the kit writes them (tests/attestations/test_kit.py runs the kit itself)."""

import json
import sys
import tarfile

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils.text import slugify
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from attestations import selectors, services
from attestations.models import Attestation, AuditEntry
from registry.digests import digest
from registry.models import BenchmarkRun
from registry.reruns.kit.build import DEPENDENCIES, _pyproject, kit_build, kit_filename, kit_version
from registry.reruns.kit.result import FORMAT, content_digest
from registry.reruns.models import JobKind, RerunJob
from registry.reruns.reproduce import run_spec, run_spec_digest
from registry.sources.liger import catalog
from registry.sources.liger.harness import KERNELS
from registry.stats import medians as stats
from tests.conftest import make_user
from tests.faults.support import small_cpu_rows
from tests.reruns.conftest import csv_import, spread_samples


@pytest.fixture
def cpu_runs(tmp_path, db):
    csv_import(tmp_path / "runs.csv", small_cpu_rows(2))
    return list(BenchmarkRun.objects.public().filter(environment__slug="cpu").order_by("pk"))


@pytest.fixture
def run(cpu_runs):
    return cpu_runs[0]


@pytest.fixture
def token(contributor):
    return services.api_token_regenerate(user=contributor).key


def result_file(target, **changes) -> dict:
    """A result file as kernelindex-repro writes one for `run` on a CPU (its median 0.1 ms)."""
    spec = run_spec(target)
    document = {
        "format": FORMAT,
        "run": {"id": target.pk, "url": "http://testserver" + target.get_absolute_url()},
        "specDigest": digest(spec),
        "spec": spec,
        "device": "cpu",
        "unit": "ms",
        "samples": spread_samples(0.1, count=41),
        "upstream": {"median": 0.1, "p20": 0.0995, "p80": 0.1005},
        "sampling": {"protocol": "kernelindex-cpu-v1", "stop": "precision", "timing_s": 0.2, "calls": 1},
        "environment": {
            "gpu_name": "CPU",
            "gpu_slug": "cpu",
            "cpu": "AMD EPYC 9654",
            "cpu_threads": 1,
            "torch": "2.13.0+cpu",
            "liger_kernel": "0.8.5",
            "transformers": "5.17.0",
            "python": "3.11.2",
        },
        "gpuUuid": "",
        "gpuState": {},
        "kit": {"version": kit_version(), "harness": "liger-kernel 0.8.5", "protocol": "kernelindex-cpu-v1"},
        "startedAt": "2026-12-01T00:00:00Z",
        "finishedAt": "2026-12-01T00:00:09Z",
    }
    document.update(changes)
    document["digest"] = content_digest(document)
    return document


def upload(client, run, body, token):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        reverse("api-run-reproductions", args=[run.pk]),
        data=raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )


def refusal(response) -> str:
    assert response.status_code == 400, response.content
    return response.json()["file"][0]


class TestAResultFileIsFiledWithItsFiguresComputedHere:
    def test_the_upload_is_pending_with_median_interval_and_verdict_from_its_samples(
        self, client, run, token
    ):
        document = result_file(run)

        response = upload(client, run, document, token)

        assert response.status_code == 201, response.content
        filed = Attestation.objects.get()
        assert response.json()["id"] == filed.pk
        assert filed.state == Attestation.State.PENDING
        assert filed.origin == Attestation.Origin.FILE
        assert filed.samples == document["samples"]
        assert (filed.median, filed.p20, filed.p80) == stats.quantiles(document["samples"])
        assert (filed.ci_low, filed.ci_high) == stats.median_interval(document["samples"])
        assert filed.verdict == "inconclusive"  # 0.1 ms against a published 0.09–0.11: wider than ±2%
        assert filed.verdict_note.startswith("Compared: upstream's do_bench figure")  # a source's run
        assert filed.torch_version == "2.13.0+cpu"
        assert filed.result["specDigest"] == run_spec_digest(run)
        assert "samples" not in filed.result
        assert [c["check"] for c in filed.checks] == ["digest", "run", "specDigest", "samples", "GPU model"]
        assert all(c["passed"] for c in filed.checks)
        run.refresh_from_db()
        assert run.evidence_level == "reported"

    def test_a_far_off_file_disagrees_and_a_moderator_turns_it_into_a_rerun(
        self, run, token, moderator, moderator_client
    ):
        # Its own client: moderator_client is the `client` fixture logged in as the moderator, whose
        # session would make the moderator the file's author, and nobody decides their own filing.
        upload(Client(), run, result_file(run, upstream={"median": 1.0, "p20": 0.99, "p80": 1.01}), token)
        filed = Attestation.objects.get()
        assert filed.verdict == "disagrees"

        response = moderator_client.post(
            reverse("admin:attestations_attestation_changelist") + "?state=all",
            {"action": "rerun_disagreeing", "_selected_action": [filed.pk]},
        )

        assert response.status_code == 302
        job = RerunJob.objects.get()
        assert (job.kind, job.run_id, job.requested_by) == (JobKind.RERUN, run.pk, moderator)
        assert f"reproduction #{filed.pk} disagrees" in job.reason
        assert AuditEntry.objects.for_object(filed).filter(action="rerun_requested").exists()
        # `client` is moderator_client, logged in before the upload: the session comes before the
        # token, so the file is the moderator's own, and another moderator must decide it.
        other = make_user("grace")
        services.moderator_add(user=other)
        services.attestation_approve(attestation=filed, moderator=other)
        run.refresh_from_db()
        assert run.evidence_level == "reported"  # neither the file, its approval nor the request changes it

    def test_the_admin_shows_the_checks_and_both_environments(self, client, run, token, moderator_client):
        upload(client, run, result_file(run), token)
        filed = Attestation.objects.get()

        page = moderator_client.get(reverse("admin:attestations_attestation_change", args=[filed.pk]))

        html = page.content.decode()
        assert page.status_code == 200
        assert "Checks of the result file" in html
        assert "this run&#x27;s spec" in html or "this run's spec" in html
        assert "AMD EPYC 9654" in html

    def test_the_form_takes_the_file_too(self, contributor_client, run):
        document = result_file(run)

        response = contributor_client.post(
            reverse("attestations:attestation-create", args=[run.pk]),
            {"kind": "reproduction", "file": SimpleUploadedFile("r.json", json.dumps(document).encode())},
        )

        assert response.status_code == 302, response.content.decode()[-2000:]
        assert Attestation.objects.get().origin == Attestation.Origin.FILE

    def test_a_typed_reproduction_is_still_possible_and_marked_typed(self, contributor, run):
        typed = services.attestation_submit(
            run=run,
            author=contributor,
            kind="reproduction",
            median=0.1,
            p20=0.09,
            p80=0.11,
            unit="ms",
            gpu_product="CPU",
        )
        assert typed.origin == Attestation.Origin.TYPED
        assert typed.samples == [] and typed.verdict == ""


class TestARefusedFileStoresNothing:
    @pytest.mark.parametrize(
        ("change", "reason"),
        [
            (lambda d: {**d, "extra": 1}, "extra: unknown field"),
            (lambda d: {k: v for k, v in d.items() if k != "gpuState"}, "gpuState: missing"),
            (
                lambda d: {**d, "samples": [s * 2 for s in d["samples"]]},
                "digest: the file's content hashes to",
            ),
        ],
    )
    def test_a_changed_file(self, client, run, token, change, reason):
        assert refusal(upload(client, run, change(result_file(run)), token)).startswith(reason)
        assert not Attestation.objects.exists() and not AuditEntry.objects.exists()

    @pytest.mark.parametrize(
        ("changes", "reason"),
        [
            ({"unit": "MB"}, "unit: the file measured 'MB'"),
            ({"samples": [0.1] * 9}, "samples: 9 samples; between 10 and 20,000"),
            ({"samples": [0.1] * 20 + [-1.0]}, "samples[20]: -1.0 is not a positive finite number"),
            ({"samples": [0.1] * 20 + [5e6]}, "samples[20]: 5e+06 ms is above the bound"),
            ({"samples": [0.1] * 20 + [True]}, "samples[20]: True is not a positive finite number"),
            ({"environment": {"gpu_name": "CPU", "secret": "x"}}, "environment: unknown field secret"),
            ({"specDigest": "sha256:" + "0" * 64}, "specDigest: the file ran spec sha256:000"),
            ({"format": "other/v9"}, "format: 'other/v9' is not"),
        ],
    )
    def test_a_file_whose_content_is_out_of_bounds(self, client, run, token, changes, reason):
        assert refusal(upload(client, run, result_file(run, **changes), token)).startswith(reason)
        assert not Attestation.objects.exists()

    def test_a_file_for_another_run(self, client, cpu_runs, token):
        run, other = cpu_runs
        assert refusal(upload(client, other, result_file(run), token)).startswith(
            f"run: this file reproduces run {run.pk}, not run {other.pk}"
        )
        assert not Attestation.objects.exists()

    def test_a_file_with_another_runs_id_but_its_spec(self, client, cpu_runs, token):
        run, other = cpu_runs
        forged = result_file(run, run={"id": other.pk, "url": "http://testserver/"})
        assert refusal(upload(client, other, forged, token)).startswith("specDigest: the file ran spec")
        assert not Attestation.objects.exists()

    def test_a_file_run_under_other_timing_settings(self, client, run, token, settings):
        document = result_file(run)
        settings.CONTROLLED_TIMING = {**settings.CONTROLLED_TIMING, "budget_s": 99.0}
        assert refusal(upload(client, run, document, token)).startswith("specDigest:")

    def test_an_oversized_file(self, client, run, token, settings):
        raw = json.dumps(result_file(run)).encode()
        settings.REPRODUCTION_FILE_MAX_BYTES = len(raw) - 1
        assert refusal(upload(client, run, raw, token)) == (
            f"file: {len(raw):,} bytes; at most {len(raw) - 1:,} are accepted (REPRODUCTION_FILE_MAX_BYTES)"
        )
        assert not Attestation.objects.exists()

    @pytest.mark.parametrize(
        ("raw", "reason"),
        [
            (b"{not json", "file: not a JSON document (line 1, column 2"),
            (b'{"samples": NaN}', "file: NaN is not a number JSON allows"),
            (b"[1, 2]", "file: must be a JSON object"),
            (b"\xff\xfe", "file: not UTF-8 text"),
        ],
    )
    def test_a_file_that_is_not_a_result_file(self, client, run, token, raw, reason):
        assert refusal(upload(client, run, raw, token)).startswith(reason)
        assert not Attestation.objects.exists()

    def test_the_same_file_twice_is_a_duplicate(self, client, run, token):
        document = result_file(run)
        assert upload(client, run, document, token).status_code == 201
        assert upload(client, run, document, token).status_code == 400
        assert Attestation.objects.count() == 1

    def test_a_stranger_without_a_token_cannot_upload(self, client, run):
        response = client.post(
            reverse("api-run-reproductions", args=[run.pk]), data=b"{}", content_type="application/json"
        )
        assert response.status_code in (401, 403)


class TestTheSummaryCountsDataBearingReproductionsApart:
    def test_typed_and_data_bearing_lines_with_the_spread_of_medians(
        self, client, run, token, contributor, moderator
    ):
        upload(client, run, result_file(run), token)
        upload(client, run, result_file(run, samples=spread_samples(0.104, count=41)), token)
        typed = services.attestation_submit(
            run=run,
            author=contributor,
            kind="reproduction",
            median=0.1,
            p20=0.09,
            p80=0.11,
            unit="ms",
            gpu_product="CPU",
        )
        for attestation in Attestation.objects.all():
            services.attestation_approve(attestation=attestation, moderator=moderator)

        lines = selectors.reproduction_summary(run, selectors.run_approved_attestations(run))

        assert [str(line) for line in lines] == [
            "2 reproductions with data on CPU: medians 0.1–0.104 ms, within ±4.0%",
            "1 typed reproduction on CPU, within ±0.0%",
        ]
        page = client.get(run.get_absolute_url()).content.decode()
        assert "With its data" in page and "Typed" in page
        assert 'The contributor\'s verdict: <strong class="verdict verdict-inconclusive">' in page
        assert typed.origin == "typed"


class TestTheRunPageAndTheSpec:
    def test_the_page_shows_the_command_with_the_sites_own_urls_and_what_it_needs(self, client, run):
        html = client.get(run.get_absolute_url()).content.decode()

        assert f"pip install http://testserver/kit/{kit_filename()}" in html
        assert f"kernelindex-repro http://testserver{run.get_absolute_url()} --upload" in html
        assert "any CPU (a CPU run)" in html
        assert "about 30 s" in html  # a cold start plus 0.1 ms calls: the start dominates

    def test_the_spec_endpoint_serves_the_spec_and_its_digest(self, client, run):
        served = client.get(reverse("run-spec", args=[run.pk])).json()

        assert served["specDigest"] == run_spec_digest(run) == digest(served["spec"])
        assert served["spec"]["job"]["kernel"] == "geglu" and served["spec"]["job"]["device"] == "cpu"
        assert served["spec"]["digests"]["workload"] == run.workload.digest
        assert served["mappable"] is True
        assert served["uploadUrl"] == f"http://testserver/api/v1/runs/{run.pk}/reproductions/"
        assert served["protocols"]["cpu"]["name"] == "kernelindex-cpu-v1"


class TestTheKit:
    def test_kit_serves_the_current_sdist_and_redirects_to_it(self, client, db):
        assert client.get("/kit/").headers["Location"] == f"/kit/{kit_filename()}"
        response = client.get(f"/kit/{kit_filename()}")
        assert response.status_code == 200
        assert b"".join(response.streaming_content) == kit_build().read_bytes()
        assert client.get("/kit/kernelindex-kit-0.1.tar.gz").status_code == 404

    def test_the_kit_imports_nothing_of_the_site_and_slugs_gpus_as_the_site_does(self, tmp_path, db):
        with tarfile.open(kit_build(dest=tmp_path)) as sdist:
            sdist.extractall(tmp_path, filter="data")
        root = next(p for p in tmp_path.iterdir() if p.is_dir())
        sources = "\n".join(p.read_text() for p in (root / "kernelindex_kit").rglob("*.py"))
        assert "from registry" not in sources and "import django" not in sources
        sys.path.insert(0, str(root))
        try:
            from kernelindex_kit import VERSION
            from kernelindex_kit.harness import kernels, spec
            from kernelindex_kit.harness.spec import gpu_slug

            assert VERSION == kit_version()
            # Liger's mapping, kept in its folder, is shipped as the kit's harness/kernels.py and
            # is what the kit's spec check reads.
            assert set(kernels.KERNELS) == set(KERNELS) and spec.KERNELS is kernels.KERNELS
            for name in [*catalog.GPUS, "CPU"]:
                assert gpu_slug(name) == slugify(name)
        finally:
            sys.path.remove(str(root))
            for name in [m for m in sys.modules if m.startswith("kernelindex_kit")]:
                del sys.modules[name]

    def test_what_the_kit_needs_is_in_the_wheelhouse_requirements(self):
        """scripts/wheelhouse.py carries requirements.txt and requirements-worker.txt: an offline
        host finds every dependency of the kit there (or in its image), and nothing to build it."""
        listed = {
            canonicalize_name(Requirement(line).name)
            for path in (
                settings.BASE_DIR / "requirements.txt",
                settings.BASE_DIR / "requirements-worker.txt",
            )
            for line in path.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "-"))
        }
        assert {canonicalize_name(Requirement(d).name) for d in DEPENDENCIES} <= listed
        assert "requires = []" in _pyproject(kit_version()).decode()
