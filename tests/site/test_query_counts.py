"""Every page and endpoint does a fixed number of queries, whatever the size of the registry:
measured on a registry of 4 runs, then asserted on the same registry grown to 216 runs."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry.models import BenchmarkRun, Source
from tests.site.conftest import liger_rows

SMALL = {"providers": ("liger", "huggingface"), "gpus": 1, "xs": (1024, 2048), "modes": ("backward",)}
LARGE = {
    "kernels": ("geglu", "swiglu"),
    "providers": ("liger", "huggingface", "torch"),
    "gpus": 3,
    "xs": (1024, 2048, 4096, 8192),
    "modes": ("forward", "backward", "full"),
}


def _run(provider="huggingface"):
    return BenchmarkRun.objects.get(
        kernel__slug="geglu",
        implementation__provider=provider,
        operation_mode="backward",
        environment__slug="nvidia-a100-sxm4-80gb",
        workload__x_value=2048,
    )


PAGES = {
    "home": lambda: reverse("registry:home"),
    "run page": lambda: _run().get_absolute_url(),
    "run page by digest": lambda: reverse("registry:run-by-digest", args=[_run().digest]),
    "compare page": lambda: reverse("registry:compare", args=[_run().pk, _run("liger").pk]),
    "kernel list": lambda: reverse("registry:kernel-list"),
    "kernel page": lambda: reverse("registry:kernel-detail", args=["geglu"]),
    "kernel page, filtered": lambda: reverse("registry:kernel-detail", args=["geglu"])
    + "?gpu=nvidia-a100-sxm4-80gb&param=T:2048&sort=-median",
    "run list": lambda: reverse("registry:run-list") + "?sort=median",
    "GPU list": lambda: reverse("registry:gpu-list"),
    "GPU page": lambda: reverse("registry:gpu-detail", args=["nvidia-a100-sxm4-80gb"]),
    "implementation list": lambda: reverse("registry:implementation-list"),
    "implementation page": lambda: reverse("registry:implementation-detail", args=["liger"]),
    "source list": lambda: reverse("registry:source-list"),
    "source page": lambda: reverse("registry:source-detail", args=["liger-kernel"]),
    "search": lambda: reverse("registry:search") + "?q=geglu",
    "BibTeX": lambda: reverse("registry:run-cite-bibtex", args=[_run().pk]),
    "CSL-JSON": lambda: reverse("registry:run-cite-csl", args=[_run().pk]),
    "API runs": lambda: reverse("run-list") + "?kernel=geglu&page_size=500",
    "API run": lambda: reverse("run-detail", args=[_run().pk]),
    "API run manifest": lambda: reverse("run-manifest", args=[_run().pk]),
    "API manifest by digest": lambda: reverse("manifest-detail", args=[_run().digest]),
    "API kernels": lambda: reverse("kernel-list"),
    "API kernel": lambda: reverse("kernel-detail", args=["geglu"]),
    "API implementations": lambda: reverse("implementation-list"),
    "API environments": lambda: reverse("environment-list"),
    "API sources": lambda: reverse("source-list"),
    "API groups": lambda: reverse("comparison-group-list") + "?page_size=500",
    "API group": lambda: reverse("comparison-group-detail", args=[_run().comparison_key]),
    "CSV export": lambda: reverse("export-csv"),
    "JSON Lines export": lambda: reverse("export-jsonl"),
}


def _fetch(client, url):
    response = client.get(url)
    if response.streaming:
        b"".join(response.streaming_content)
    return response


@pytest.mark.django_db
class TestQueryCountsStayConstant:
    @pytest.mark.parametrize("name", list(PAGES))
    def test_page_takes_the_same_queries_at_4_and_216_runs(
        self, client, import_rows, django_assert_num_queries, name, settings
    ):
        settings.PAGE_CACHE_SECONDS = 0  # count rendering, not a stored copy (test_page_cache.py)
        import_rows(liger_rows(**SMALL))
        assert BenchmarkRun.objects.count() == 4
        url = PAGES[name]()
        with CaptureQueriesContext(connection) as small:
            assert _fetch(client, url).status_code == 200
        assert len(small) <= 8, [q["sql"] for q in small.captured_queries]

        summary = import_rows(liger_rows(**LARGE))
        assert (summary.created, summary.withdrawn) == (212, 0)
        assert BenchmarkRun.objects.count() == 216
        url = PAGES[name]()
        with django_assert_num_queries(len(small)):
            assert _fetch(client, url).status_code == 200

    def test_the_large_registry_is_really_larger_on_every_axis(self, import_rows):
        import_rows(liger_rows(**LARGE))
        assert BenchmarkRun.objects.values("environment__slug").distinct().count() == 3
        assert BenchmarkRun.objects.values("kernel").distinct().count() == 2
        assert Source.objects.count() == 1
        assert _run().group_size == 3
