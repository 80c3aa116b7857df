"""What the pages say about runs that were superseded, withdrawn or verified, and the pages that
list the registry: home, source, GPU, implementation and search."""

import pytest
from django.urls import reverse

from registry.models import EVIDENCE_EXPLANATIONS, BenchmarkRun, EvidenceLevel
from tests.site.conftest import liger_rows


@pytest.fixture
def two_imports(import_rows):
    """A first file, then a newer one that replaces one row and no longer lists another."""
    first = liger_rows()
    import_rows(first)
    second = [dict(row) for row in first]
    second[0]["timestamp"] = "2025-01-02 03:04:05"
    second[0]["liger_version"] = "0.5.0"
    dropped = second.pop()
    summary = import_rows(second)
    assert (summary.superseded, summary.withdrawn) == (1, 1)
    return dropped


@pytest.mark.django_db
class TestSupersededAndWithdrawnRuns:
    def test_superseded_run_links_to_the_run_that_replaced_it(self, client, two_imports):
        old = BenchmarkRun.objects.get(superseded_by__isnull=False)
        response = client.get(old.get_absolute_url())
        assert response.status_code == 200
        body = response.content.decode()
        assert "<strong>Superseded.</strong>" in body
        assert f'href="{old.superseded_by.get_absolute_url()}"' in body
        assert "not ranked" in body

    def test_the_replacement_names_what_it_replaced(self, client, two_imports):
        old = BenchmarkRun.objects.get(superseded_by__isnull=False)
        response = client.get(old.superseded_by.get_absolute_url())
        assert f'href="{old.get_absolute_url()}"' in response.content.decode()
        assert "<strong>Superseded.</strong>" not in response.content.decode()

    def test_withdrawn_run_says_so_and_stays_published(self, client, two_imports):
        gone = BenchmarkRun.objects.get(withdrawn=True)
        response = client.get(gone.get_absolute_url())
        assert response.status_code == 200
        assert "<strong>Withdrawn by the source.</strong>" in response.content.decode()

    def test_charts_leave_out_replaced_and_withdrawn_runs(self, client, two_imports):
        response = client.get(reverse("registry:kernel-detail", args=["geglu"]))
        charted = {p.run_id for panel in response.context["panels"] for s in panel.series for p in s.points}
        assert charted == set(BenchmarkRun.objects.current().values_list("pk", flat=True))
        assert response.context["page"].paginator.count == BenchmarkRun.objects.count() == 9

    def test_source_page_shows_the_import_history(self, client, two_imports):
        response = client.get(reverse("registry:source-detail", args=["liger-kernel"]))
        assert response.status_code == 200
        imports = list(response.context["imports"])
        assert [(i.created, i.unchanged, i.superseded, i.withdrawn) for i in imports] == [
            (1, 6, 1, 1),
            (8, 0, 0, 0),
        ]
        body = response.content.decode()
        assert "BSD-2-Clause" in body
        assert "bench-2.csv" in body and "bench-1.csv" in body


@pytest.mark.django_db
class TestEvidenceLevels:
    def test_a_reproduced_run_shows_its_badge_and_appears_as_recently_verified(self, client, import_rows):
        import_rows(liger_rows())
        run = BenchmarkRun.objects.first()
        BenchmarkRun.objects.filter(pk=run.pk).update(evidence_level=EvidenceLevel.REPRODUCED)
        page = client.get(run.get_absolute_url()).content.decode()
        assert "Evidence: Reproduced" in page
        assert EVIDENCE_EXPLANATIONS[EvidenceLevel.REPRODUCED].replace("'", "&#x27;") in page
        home = client.get(reverse("registry:home"))
        assert list(home.context["verified"]) == [run]

    def test_home_counts_runs_by_level(self, client, import_rows):
        import_rows(liger_rows())
        response = client.get(reverse("registry:home"))
        counts = response.context["counts"]
        assert (counts["runs"], counts["kernels"], counts["gpus"], counts["implementations"]) == (8, 1, 1, 2)
        assert [row["count"] for row in counts["by_level"]] == [8, 0, 0]

    def test_home_of_an_empty_registry(self, client, db):
        response = client.get(reverse("registry:home"))
        assert response.status_code == 200
        assert response.context["counts"]["runs"] == 0


@pytest.mark.django_db
class TestBrowseAndSearch:
    def test_search_by_external_id_or_digest_goes_to_the_run(self, client, import_rows):
        import_rows(liger_rows())
        run = BenchmarkRun.objects.first()
        for query in (run.external_id, run.digest, run.digest.removeprefix("sha256:")):
            response = client.get(reverse("registry:search"), {"q": query})
            assert response.status_code == 302
            assert response["Location"] == run.get_absolute_url()

    def test_search_by_digest_prefix_lists_the_run(self, client, import_rows):
        import_rows(liger_rows())
        run = BenchmarkRun.objects.first()
        response = client.get(reverse("registry:search"), {"q": run.digest[:20]})
        assert response.status_code == 200
        assert run in response.context["page"].object_list

    def test_search_finds_kernels_projects_and_gpus(self, client, import_rows):
        import_rows(liger_rows(gpus=2))
        response = client.get(reverse("registry:search"), {"q": "h100"})
        assert [g["slug"] for g in response.context["results"].gpus] == ["nvidia-h100-80gb-hbm3"]
        response = client.get(reverse("registry:search"), {"q": "Transformers"})
        assert [i["provider"] for i in response.context["results"].implementations] == ["huggingface"]
        response = client.get(reverse("registry:search"), {"q": "GeGLU"})
        assert [k.slug for k in response.context["results"].kernels] == ["geglu"]

    def test_gpu_and_implementation_lists_link_to_their_runs(self, client, import_rows):
        import_rows(liger_rows(gpus=2))
        gpus = client.get(reverse("registry:gpu-list")).context["gpus"]
        assert [(g["slug"], g["runs"]) for g in gpus] == [
            ("nvidia-a100-sxm4-80gb", 8),
            ("nvidia-h100-80gb-hbm3", 8),
        ]
        page = client.get(reverse("registry:gpu-detail", args=["nvidia-h100-80gb-hbm3"])).context["page"]
        assert {r.environment.slug for r in page.object_list} == {"nvidia-h100-80gb-hbm3"}
        implementations = client.get(reverse("registry:implementation-list")).context["implementations"]
        assert {(i["provider"], i["project"], i["runs"]) for i in implementations} == {
            ("liger", "Liger-Kernel", 8),
            ("huggingface", "Hugging Face Transformers", 8),
        }
        page = client.get(reverse("registry:implementation-detail", args=["liger"])).context["page"]
        assert {r.implementation.provider for r in page.object_list} == {"liger"}

    def test_runs_can_be_browsed_by_project(self, client, import_rows):
        import_rows(liger_rows())
        response = client.get(reverse("registry:run-list"), {"project": "Liger-Kernel"})
        assert response.status_code == 200
        assert response.context["page"].paginator.count == 4
