"""The reference record's rank with its uncertainty (issue 14's "done when"), and what the data
supports across the bundled runs: the figures the README gives."""

from collections import Counter
from pathlib import Path

import pytest
from django.urls import reverse

from registry import rank_status
from registry.models import BenchmarkRun
from registry.rank_status import IntervalBasis, RankStatus
from registry.reruns.controlled import (
    BUNDLED_CONTROLLED_DIR,
    controlled_document_read,
    controlled_files,
    controlled_runs_load,
)
from registry.stats import medians as stats
from tests.site.test_reference_record_pages import REFERENCE_ID, text_of

ONE_CALL_EACH = (
    "one sample: the order is not established: the order between this run and #1 rests on one call "
    "each (p20 = p50 = p80)"
)


@pytest.fixture(autouse=True)
def no_page_cache(settings):
    settings.PAGE_CACHE_SECONDS = 0


@pytest.fixture
def reference(bundled):
    return BenchmarkRun.objects.get(external_id=REFERENCE_ID)


@pytest.mark.django_db
class TestReferenceRecord:
    def test_its_page_says_its_rank_and_that_the_order_rests_on_one_call_each(self, client, reference):
        response = client.get(reference.get_absolute_url())
        assert response.status_code == 200
        text = text_of(response)
        assert f"rank 2 in its comparison group of {reference.group_size} runs {ONE_CALL_EACH}" in text
        # The group table says it of #1 too, against its #2 (this run).
        assert (
            'data-status="one-sample">one sample: the order is not established</td>'
            in response.content.decode()
        )

    def test_the_api_says_one_sample_with_no_interval(self, client, reference):
        data = client.get(reverse("run-detail", args=[reference.pk])).json()
        assert (data["rank"], data["rank_status"], data["rank_interval_basis"]) == (
            2,
            "one-sample",
            "one-call",
        )
        assert (data["rank_interval_low"], data["rank_difference_low"]) == (None, None)
        best = BenchmarkRun.objects.get(comparison_key=reference.comparison_key, rank=1)
        assert data["rank_compared_with"] == best.pk
        assert data["rank_difference"] == pytest.approx(reference.median / best.median - 1)
        assert round(best.median, 2) == 141.29

    def test_its_compare_page_gives_the_ratio_and_says_why_it_has_no_interval(self, client, reference):
        best = BenchmarkRun.objects.get(comparison_key=reference.comparison_key, rank=1)
        response = client.get(reverse("registry:compare", args=[reference.pk, best.pk]))
        text = text_of(response)
        assert "Ratio B / A 0.980 no interval: one timed call on a side and no samples" in text
        assert ONE_CALL_EACH in text


@pytest.mark.django_db
class TestBundledFigures:
    def test_what_the_data_supports_beside_each_current_rank(self, bundled):
        runs = rank_status.attach(BenchmarkRun.objects.public().current())
        latency = Counter(r.standing.status for r in runs if r.metric == "latency")
        memory = Counter(r.standing.status for r in runs if r.metric == "memory")
        assert latency == {
            RankStatus.AHEAD: 461,
            RankStatus.BEHIND: 600,
            RankStatus.TIED: 115,
            RankStatus.ONE_SAMPLE: 473,
        }
        # The 40 implausible peaks (relu_squared on the H100, softmax on the RTX 3090) are compared
        # with nothing; they fill 20 groups of two, which have no plausible run.
        assert memory == {
            RankStatus.AHEAD: 309,
            RankStatus.BEHIND: 414,
            RankStatus.TIED: 36,
            RankStatus.IMPLAUSIBLE: 40,
        }
        assert sum(r.standing.spread.single for r in runs) == 367  # single calls, as issue 14 counts
        best = {}  # each group's best plausible run: the first in rank order that is not implausible
        for run in sorted(runs, key=lambda r: (r.rank, r.median, r.pk)):
            if not run.implausible:
                best.setdefault(run.comparison_key, run)
        # 1,082 groups (1,100 runs ranked 1: tied #1s share the rank); a group tied at the top
        # counts once, and the 20 all-implausible ones have no best plausible run.
        assert (len({r.comparison_key for r in runs}), len(best)) == (1082, 1062)
        firsts = Counter(run.standing.status for run in best.values())
        assert firsts == {RankStatus.AHEAD: 770, RankStatus.ONE_SAMPLE: 217, RankStatus.TIED: 75}
        # docs/site.md gives these figures as counted here.
        groups = len({r.comparison_key for r in runs})
        single = sum(r.standing.spread.single for r in runs)
        site = " ".join((Path(__file__).resolve().parents[2] / "docs" / "site.md").read_text().split())
        assert (
            f"Of the {len(runs):,} current bundled runs: latency ({latency.total():,}) {latency[RankStatus.AHEAD]} "
            f"#1s ahead of their #2, {latency[RankStatus.BEHIND]} runs behind their #1, {latency[RankStatus.TIED]} "
            f"tied, {latency[RankStatus.ONE_SAMPLE]} one sample ({single} runs are single calls); memory "
            f"({memory.total()}) {memory[RankStatus.AHEAD]} ahead, {memory[RankStatus.BEHIND]} behind, "
            f"{memory[RankStatus.TIED]} tied (equal peaks), {memory[RankStatus.IMPLAUSIBLE]} implausible. Of the "
            f"{groups:,} groups, {groups - len(best)} have no plausible run (the {memory[RankStatus.IMPLAUSIBLE]} "
            f"implausible peaks, two a group); in the other {len(best):,} the best plausible run's lead is "
            f"established in {firsts[RankStatus.AHEAD]}, {firsts[RankStatus.TIED]} are tied at the top and "
            f"{firsts[RankStatus.ONE_SAMPLE]} rest on one call." in site
        )

    def test_what_the_controlled_runs_samples_support(self, bundled):
        """Checked against the shipped files themselves, so that the sweep can add runs: each
        controlled run is compared by the 95% interval of its median (from its measure job's
        samples), or, for a peak memory whose samples give none (identical peaks), shown
        without spread; a run alone in its group says so, a #1 is ahead or tied, the rest are
        behind or tied, and nothing rests on one timed call."""
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)
        shipped = {
            entry["run"]["digest"]: next(j["samples"] for j in entry["jobs"] if j["kind"] == "measure")
            for path in controlled_files(BUNDLED_CONTROLLED_DIR)
            for entry in controlled_document_read(path)["runs"]
        }
        runs = rank_status.attach(
            BenchmarkRun.objects.public().current().filter(source__slug="kernelindex-controlled")
        )
        assert len(runs) > 0 and all(run.digest in shipped for run in runs)
        for run in runs:
            interval = stats.median_interval(shipped[run.digest])
            expected = IntervalBasis.MEDIAN_CI if interval else IntervalBasis.NO_SPREAD
            if run.metric == "latency":
                expected = IntervalBasis.MEDIAN_CI  # the protocol stops on that interval
            assert run.standing.spread.basis == expected, (run.pk, run.metric, len(shipped[run.digest]))
            if run.group_size == 1:
                assert run.standing.status == RankStatus.ALONE
            elif run.rank == 1:
                assert run.standing.status in {RankStatus.AHEAD, RankStatus.TIED}
            else:
                assert run.standing.status in {RankStatus.BEHIND, RankStatus.TIED}
        statuses = Counter(run.standing.status for run in runs)
        assert statuses[RankStatus.ONE_SAMPLE] == 0
        assert statuses[RankStatus.ALONE] == sum(run.group_size == 1 for run in runs)
