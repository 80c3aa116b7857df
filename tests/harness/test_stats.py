"""The statistics of controlled runs (registry/stats/medians.py), checked against values
computed here independently: order-statistic ranks from the binomial distribution, the spread of
single calls from numpy's quantiles, and the bootstrap's coverage of a known shift."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from registry.stats import medians as stats


def textbook_median_interval(samples, confidence):
    """[x_(k), x_(n-k+1)] with k the largest rank for which P(Binomial(n, 1/2) < k) <= alpha/2;
    None when even k = 1 is too likely (too few samples)."""
    values = np.sort(np.asarray(samples, dtype=float))
    n, tail = values.size, (1 - confidence) / 2
    ranks = [k for k in range(1, n // 2 + 1) if binom.cdf(k - 1, n, 0.5) <= tail]
    if not ranks:
        return None
    k = max(ranks)
    return values[k - 1], values[n - k]


class TestMedianInterval:
    @pytest.mark.parametrize("n", [6, 7, 10, 13, 20, 31, 50])
    @pytest.mark.parametrize("confidence", [0.95, 0.99])
    def test_it_is_the_order_statistic_interval_of_the_binomial_ranks(self, n, confidence):
        samples = np.random.default_rng(n).lognormal(0.0, 0.1, n)

        expected = textbook_median_interval(samples, confidence)

        assert stats.median_interval(samples, confidence) == (
            None if expected is None else (pytest.approx(expected[0]), pytest.approx(expected[1]))
        )

    def test_ten_samples_give_the_second_and_ninth_at_95_percent(self):
        # binom.cdf(1, 10, 0.5) = 11/1024 <= 0.025 < binom.cdf(2, 10, 0.5) = 56/1024: k = 2.
        assert stats.median_interval([7, 1, 9, 3, 5, 2, 10, 4, 8, 6], 0.95) == (2.0, 9.0)

    def test_too_few_samples_have_no_finite_interval(self):
        # Five samples: P(all five on one side of the median) = 2/32 > 5%.
        assert stats.median_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) is None
        assert stats.median_interval([1.0], 0.95) is None
        assert stats.median_interval([], 0.95) is None


class TestRelativePrecision:
    def test_it_is_the_wider_half_width_relative_to_the_median(self):
        samples = np.random.default_rng(1).normal(10.0, 0.5, 60)
        low, high = textbook_median_interval(samples, 0.99)
        median = float(np.median(samples))

        assert stats.relative_precision(samples, 0.99) == pytest.approx(
            max(median - low, high - median) / median
        )

    def test_without_a_finite_interval_it_is_infinite(self):
        assert stats.relative_precision([1.0, 2.0, 3.0], 0.99) == math.inf


class TestQuantiles:
    def test_median_p20_p80_in_the_sources_order(self):
        assert stats.quantiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]) == (6.0, 3.0, 9.0)


class TestBootstrapOverBothSides:
    def test_the_interval_covers_a_known_shift_and_excludes_none(self):
        rng = np.random.default_rng(7)
        old = 2.0 * rng.lognormal(0.0, 0.02, 300)
        new = 2.0 * 1.05 * rng.lognormal(0.0, 0.02, 300)

        point, low, high, how = stats.difference_interval(stats.Side(samples=new), stats.Side(samples=old))

        assert "bootstrap" in how
        assert low < 0.05 < high, (low, high)
        assert low > 0.03 and high < 0.07  # 300 samples a side pin a 5% shift to about ±1%
        assert point == pytest.approx(np.median(new) / np.median(old) - 1)

    def test_it_covers_the_true_difference_about_as_often_as_it_says(self):
        covered = 0
        for seed in range(40):
            rng = np.random.default_rng(seed)
            old = rng.lognormal(0.0, 0.05, 80)
            new = 1.02 * rng.lognormal(0.0, 0.05, 80)
            _, low, high, _ = stats.difference_interval(stats.Side(samples=new), stats.Side(samples=old))
            covered += low <= 0.02 <= high
        # 95% nominal: 38 of 40 expected; 34 or fewer would happen by chance about 3% of the time
        # for a correct 95% interval, and routinely for a too-narrow one.
        assert covered >= 35, covered

    def test_the_same_samples_give_the_same_interval(self):
        rng = np.random.default_rng(3)
        new, old = stats.Side(samples=rng.normal(5, 0.1, 50)), stats.Side(samples=rng.normal(5, 0.1, 50))

        assert stats.difference_interval(new, old) == stats.difference_interval(new, old)

    def test_identical_constant_samples_agree_exactly(self):
        # Peak memory: every one of the 10 peaks the same, on both sides.
        side = stats.Side(samples=[812.5] * 10)

        point, low, high, _ = stats.difference_interval(side, side)

        assert (point, low, high) == (0.0, 0.0, 0.0)
        assert stats.verdict(low, high, 0.02) == "agrees"


class TestSamplesThatMoveTogether:
    """Consecutive calls are not independent (a third of the shipped H200 jobs have a lag-1
    autocorrelation above 0.3): the verdict's bootstrap resamples the medians of consecutive
    batches, so that a stretch of samples that moved together counts once."""

    def test_batch_medians_are_the_medians_of_ten_consecutive_batches(self):
        assert list(stats.batch_medians(range(1, 22))) == [
            2,
            4.5,
            6.5,
            8.5,
            10.5,
            12.5,
            14.5,
            16.5,
            18.5,
            20.5,
        ]
        assert list(stats.batch_medians(range(10))) == [0.5, 2.5, 4.5, 6.5, 8.5]  # batches of two
        assert list(stats.batch_medians([1.0, 2.0, 3.0])) == [1.0, 2.0, 3.0]  # no two batches to form

    def test_an_op_that_drifts_through_both_jobs_is_not_called_reproduced_on_the_strength_of_its_count(
        self,
    ):
        # Both jobs descend 6% from first call to last (a card settling at its power cap); the
        # rerun is 1% slower throughout. Counted as 100 independent draws a side, the interval
        # would be about +0.2% to +1.8%: "agrees". Ten batches a side say what 100 such calls
        # really pin down.
        rng = np.random.default_rng(1)
        drift = np.linspace(1.03, 0.97, 100)
        old = 0.9 * drift * rng.lognormal(0.0, 0.001, 100)
        new = 0.9 * 1.01 * drift * rng.lognormal(0.0, 0.001, 100)

        _, low, high, how = stats.difference_interval(stats.Side(samples=new), stats.Side(samples=old))
        _, iid_low, iid_high, _ = stats.difference_interval(
            stats.Side(samples=new), stats.Side(samples=old), batched=False
        )

        assert stats.verdict(iid_low, iid_high, 0.02) == "agrees"
        assert stats.verdict(low, high, 0.02) == "inconclusive", (low, high)
        assert "10 and 10 consecutive batches" in how

    def test_two_runs_that_caught_two_levels_in_different_shares_are_not_called_different(self):
        # An op that switches between two speeds for long stretches: the measurement spent 70% of
        # its calls at the fast level, the rerun 30%. Independent draws would make the 10%
        # between the levels a firm disagreement.
        rng = np.random.default_rng(2)
        old = np.array([0.9] * 70 + [0.99] * 30) * rng.lognormal(0.0, 0.001, 100)
        new = np.array([0.9] * 30 + [0.99] * 70) * rng.lognormal(0.0, 0.001, 100)

        _, low, high, _ = stats.difference_interval(stats.Side(samples=new), stats.Side(samples=old))
        _, iid_low, iid_high, _ = stats.difference_interval(
            stats.Side(samples=new), stats.Side(samples=old), batched=False
        )

        assert stats.verdict(iid_low, iid_high, 0.02) == "disagrees"
        assert stats.verdict(low, high, 0.02) == "inconclusive", (low, high)

    def test_independent_samples_of_one_op_still_agree(self):
        rng = np.random.default_rng(4)
        old, new = rng.lognormal(0.0, 0.01, 200), rng.lognormal(0.0, 0.01, 200)

        _, low, high, _ = stats.difference_interval(stats.Side(samples=new), stats.Side(samples=old))

        assert stats.verdict(low, high, 0.02) == "agrees", (low, high)


class TestSidesWithoutSamples:
    def test_a_single_call_source_is_one_draw_spread_like_the_reruns_single_calls(self):
        rerun = np.random.default_rng(11).lognormal(np.log(10.0), 0.03, 200)
        source = stats.Side(median=10.4, p20=10.4, p80=10.4)  # p20 = p50 = p80: one timed call
        assert source.single_call and source.count == "1 sample (one timed call)"

        point, low, high, how = stats.difference_interval(stats.Side(samples=rerun), source)

        median = np.median(rerun)
        spread_low, spread_high = np.quantile(rerun, [0.025, 0.975]) / median - 1
        new_low, new_high = textbook_median_interval(rerun, 0.95)
        old_low, old_high = 10.4 * (1 + spread_low), 10.4 * (1 + spread_high)
        assert "ranges combined" in how
        assert point == pytest.approx((median - 10.4) / 10.4)
        assert low == pytest.approx((new_low - old_high) / 10.4)
        assert high == pytest.approx((new_high - old_low) / 10.4)
        # One call of a 3%-noisy op cannot settle ±2%, however close it came.
        assert stats.verdict(low, high, 0.02) == "inconclusive"

    def test_a_single_call_on_both_sides_takes_its_spread_from_the_reruns_own_samples(self):
        rerun_samples = np.random.default_rng(5).normal(20.0, 0.2, 100)
        upstream = stats.Side(median=20.1, p20=20.1, p80=20.1)
        recorded = stats.Side(median=20.0, p20=20.0, p80=20.0)

        _, low, high, _ = stats.difference_interval(upstream, recorded, spread_from=rerun_samples)

        spread_low, spread_high = np.quantile(rerun_samples, [0.025, 0.975]) / np.median(rerun_samples) - 1
        assert low == pytest.approx((20.1 * (1 + spread_low) - 20.0 * (1 + spread_high)) / 20.0)
        assert high == pytest.approx((20.1 * (1 + spread_high) - 20.0 * (1 + spread_low)) / 20.0)

    def test_a_published_p20_p80_summary_is_its_range(self):
        new = stats.Side(median=3.18, p20=3.15, p80=3.2)
        old = stats.Side(median=3.0, p20=2.9, p80=3.1)
        assert old.count == "its published p20–p80 range only (its source published no samples)"

        point, low, high, _ = stats.difference_interval(new, old)

        assert (point, low, high) == (
            pytest.approx(0.06),
            pytest.approx((3.15 - 3.1) / 3.0),
            pytest.approx((3.2 - 2.9) / 3.0),
        )

    def test_no_samples_anywhere_leave_no_interval_and_the_verdict_inconclusive(self):
        point, low, high, how = stats.difference_interval(
            stats.Side(median=1.0, p20=1.0, p80=1.0), stats.Side(median=1.0, p20=1.0, p80=1.0)
        )

        assert (point, low, high) == (0.0, None, None)
        assert "no samples" in how
        assert stats.verdict(low, high, 0.02) == "inconclusive"


class TestVerdict:
    @pytest.mark.parametrize(
        ("low", "high", "expected"),
        [
            (-0.01, 0.015, "agrees"),
            (-0.02, 0.02, "agrees"),  # the bounds belong to the tolerance
            (-0.03, 0.01, "inconclusive"),
            (0.01, 0.03, "inconclusive"),
            (-0.5, 0.5, "inconclusive"),
            (0.021, 0.2, "disagrees"),
            (-0.2, -0.021, "disagrees"),
            (None, None, "inconclusive"),
        ],
    )
    def test_whole_interval_inside_agrees_wholly_outside_disagrees_else_inconclusive(
        self, low, high, expected
    ):
        assert stats.verdict(low, high, 0.02) == expected
