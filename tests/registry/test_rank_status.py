"""What the data supports beside a rank (issue 14): ties from overlapping intervals, one timed call
that cannot order two runs, and the gap to #1 (or #2) with its interval. Pure rules, no database:
runs are unsaved rows of one comparison group."""

import pytest

from registry.models import BenchmarkRun
from registry.rank_status import IntervalBasis, RankStatus, spread_of, standing_of


def run(pk, rank, median, p20=None, p80=None, metric="latency", unit="ms"):
    return BenchmarkRun(
        pk=pk,
        rank=rank,
        median=median,
        p20=median if p20 is None else p20,
        p80=median if p80 is None else p80,
        metric=metric,
        unit=unit,
        comparison_key="sha256:group",
    )


def standings(*runs, intervals=None):
    top = sorted(runs, key=lambda r: (r.rank is None, r.rank, r.median, r.pk))[:2]
    return [standing_of(r, top, intervals or {}) for r in runs]


class TestTies:
    def test_overlapping_p20_p80_ranges_are_tied_with_the_first(self):
        first, second = run(1, 1, 10.0, 9.8, 10.3), run(2, 2, 10.2, 10.1, 10.4)
        mine, theirs = standings(first, second)
        assert (mine.status, theirs.status) == (RankStatus.TIED, RankStatus.TIED)
        assert theirs.summary == "tied with #1"
        assert mine.summary == "tied with #2"
        assert "the intervals overlap (this run: the p20–p80 range 10.1–10.4 ms; #1: " in theirs.statement

    def test_a_run_behind_the_second_is_tied_when_its_range_reaches_the_first(self):
        first, second, third = (
            run(1, 1, 10.0, 9.9, 10.1),
            run(2, 2, 11.0, 10.9, 11.1),
            run(3, 3, 12.0, 10.0, 12.5),
        )
        standing = standing_of(third, [first, second], {})
        assert standing.status == RankStatus.TIED
        assert standing.compared is first

    def test_equal_medians_share_the_rank_and_are_tied(self):
        first, other = run(1, 1, 10.0), run(2, 1, 10.0)
        standing, _ = standings(first, other)
        assert standing.status == RankStatus.TIED
        assert standing.statement == "tied with another #1: the same median"

    def test_controlled_runs_are_tied_on_their_median_intervals_not_their_p20_p80(self):
        # Sample quantiles overlap, the 95% intervals of the medians do not: ordered.
        first, second = run(1, 1, 10.0, 9.0, 11.0), run(2, 2, 10.5, 9.5, 11.5)
        intervals = {1: (9.95, 10.05), 2: (10.4, 10.6)}
        mine, theirs = standings(first, second, intervals=intervals)
        assert theirs.status == RankStatus.BEHIND
        assert theirs.spread.basis == IntervalBasis.MEDIAN_CI
        assert mine.status == RankStatus.AHEAD
        # ... and overlapping 95% intervals are a tie.
        _, theirs = standings(first, second, intervals={1: (9.95, 10.45), 2: (10.4, 10.6)})
        assert theirs.status == RankStatus.TIED


class TestOneSample:
    def test_two_single_calls_do_not_establish_the_order(self):
        first, second = run(1, 1, 141.29), run(2, 2, 144.21)
        mine, theirs = standings(first, second)
        assert (mine.status, theirs.status) == (RankStatus.ONE_SAMPLE, RankStatus.ONE_SAMPLE)
        assert theirs.statement == (
            "one sample: the order is not established: the order between this run and #1 rests on one "
            "call each (p20 = p50 = p80)"
        )
        assert theirs.spread.single and theirs.spread.basis == IntervalBasis.ONE_CALL

    def test_a_single_call_first_leaves_every_order_unestablished(self):
        first, second = run(1, 1, 10.0), run(2, 2, 20.0, 19.0, 21.0)
        mine, theirs = standings(first, second)
        assert theirs.status == RankStatus.ONE_SAMPLE
        assert "#1 is one timed call" in theirs.statement
        assert mine.status == RankStatus.ONE_SAMPLE
        assert "this run is one timed call" in mine.statement

    def test_one_call_inside_the_firsts_range_is_still_one_sample_not_a_tie(self):
        # One call has no interval: neither overlap nor separation can be claimed.
        first, second = run(1, 1, 10.0, 9.0, 11.0), run(2, 2, 10.5)
        _, theirs = standings(first, second)
        assert theirs.status == RankStatus.ONE_SAMPLE

    def test_source_peak_memory_is_a_point_not_one_call(self):
        first, second = (
            run(1, 1, 800.0, metric="memory", unit="MB"),
            run(2, 2, 1000.0, metric="memory", unit="MB"),
        )
        mine, theirs = standings(first, second)
        assert spread_of(first).basis == IntervalBasis.NO_SPREAD
        assert mine.status == RankStatus.AHEAD
        assert mine.summary == "smaller than #2 by 20.0% (20.0% to 20.0%)"
        assert theirs.summary == "larger than #1 by 25.0% (25.0% to 25.0%)"


class TestGap:
    def test_the_first_is_faster_than_the_second_by_the_gap_with_its_interval(self):
        first, second = run(1, 1, 10.0, 9.9, 10.1), run(2, 2, 12.0, 11.8, 12.3)
        mine, _ = standings(first, second)
        assert mine.status == RankStatus.AHEAD
        # (10 − 12) / 12, between (9.9 − 12.3) / 12 and (10.1 − 11.8) / 12.
        assert mine.difference == pytest.approx(-1 / 6)
        assert (mine.low, mine.high) == (pytest.approx(-0.2), pytest.approx(-1.7 / 12))
        assert mine.summary == "faster than #2 by 16.7% (14.2% to 20.0%)"

    def test_a_later_rank_is_slower_than_the_first_by_the_gap_with_its_interval(self):
        first, second, third = (
            run(1, 1, 10.0, 9.9, 10.1),
            run(2, 2, 10.05, 9.95, 10.2),
            run(3, 3, 12.0, 11.8, 12.3),
        )
        standing = standing_of(third, [first, second], {})
        assert standing.status == RankStatus.BEHIND
        assert standing.compared is first
        assert (standing.low, standing.high) == (pytest.approx(0.17), pytest.approx(0.24))
        assert standing.summary == "slower than #1 by 20.0% (17.0% to 24.0%)"
        assert standing.compared_id == 1

    def test_alone_and_unranked(self):
        alone = run(1, 1, 10.0, 9.0, 11.0)
        assert standings(alone)[0].status == RankStatus.ALONE
        withdrawn = run(2, None, 9.0)
        standing = standing_of(withdrawn, [alone], {})
        assert (standing.status, standing.summary) == (RankStatus.UNRANKED, "not ranked")
