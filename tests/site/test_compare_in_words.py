"""The compare page says in words which run is faster, by how much, and whether the data
establish it; software versions are compared package by package, not as JSON."""

import re

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.rank_status import Ratio, compare_in_words
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from tests.site.test_reference_record_pages import REFERENCE_ID


def words(client, a, b) -> str:
    html = client.get(reverse("registry:compare", args=[a.pk, b.pk])).content.decode()
    return re.search(r'data-figure="in-words"><strong>(.*?)</strong>', html).group(1)


@pytest.fixture
def reference(db, settings, bundled):
    """The reference run and the best of its group, from the bundled data (tests/site/conftest.py
    loads it once for this module)."""
    settings.PAGE_CACHE_SECONDS = 0
    run = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
    best = BenchmarkRun.objects.get(comparison_key=run.comparison_key, rank=1)
    return run, best


@pytest.mark.django_db
class TestComparePageInWords:
    def test_the_faster_run_is_named_first_whichever_side_it_is(self, client, reference):
        huggingface, liger = reference
        assert words(client, huggingface, liger).startswith("B (liger) is 2.0% faster than A (huggingface)")
        assert words(client, liger, huggingface).startswith("A (liger) is 2.0% faster than B (huggingface)")

    def test_one_timed_call_on_a_side_does_not_establish_the_order(self, client, reference):
        assert "the order is not established" in words(client, *reference)

    def test_runs_of_two_groups_are_not_ranked(self, client, reference):
        run, _ = reference
        other = BenchmarkRun.objects.exclude(comparison_key=run.comparison_key).first()
        assert words(client, run, other).startswith("These runs are not in one comparison group")

    def test_software_is_compared_package_by_package(self, client, reference):
        run, _ = reference
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
        controlled = next(
            r for r in BenchmarkRun.objects.select_related("environment") if "torch" in r.environment.software
        )
        html = client.get(reverse("registry:compare", args=[run.pk, controlled.pk])).content.decode()
        assert "<code>Software: torch</code>" in html
        assert '{"' not in html.split("Environment", 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        (
            Ratio(0.98, 0.97, 0.99, ""),
            "B (b) is 2.0% faster than A (a) (ratio B / A 0.980, interval 0.970 to 0.990).",
        ),
        (Ratio(1.05, 1.01, 1.09, ""), "A (a) is 4.8% faster than B (b)"),
        (Ratio(0.99, 0.97, 1.01, ""), "but the interval of the ratio includes no difference"),
    ],
)
def test_the_sentence_says_what_the_interval_allows(ratio, expected):
    class Run:
        metric = "latency"
        median = 1.0

        def __init__(self, provider):
            self.implementation = type("I", (), {"provider": provider})

    assert expected in compare_in_words(Run("a"), Run("b"), ratio, comparable=True)
