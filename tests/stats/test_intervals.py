"""registry/stats/intervals.py: the interval of a median with between-block and between-process
variance components, and the equivalence verdict."""

import math

import numpy as np
import pytest

from registry.stats import intervals


def job(rng, *, level: float, drift_sd: float = 0.01, noise_sd: float = 0.005, count: int = 40):
    """A job's samples: a process level, a slow drift shared by neighbouring calls, call noise."""
    drift = np.repeat(rng.normal(0, drift_sd, 10), count // 10)
    return level * np.exp(drift + rng.normal(0, noise_sd, count))


class TestMedianEstimate:
    def test_the_variance_is_read_between_blocks_not_between_calls(self):
        rng = np.random.default_rng(1)
        ratios = []
        for _ in range(20):
            samples = job(rng, level=1.0)
            estimate = intervals.median_estimate(samples)
            ratios.append(estimate.variance / (np.var(np.log(samples), ddof=1) / samples.size))
        assert estimate.blocks == 10 and estimate.df == pytest.approx(intervals.MAD_EFFICIENCY * 9)
        assert np.median(ratios) > 3  # neighbouring calls move together
        assert estimate.median == pytest.approx(float(np.median(samples)))

    def test_one_stalled_stretch_moves_neither_the_median_nor_its_spread_much(self):
        # Ten stretches of one process, the seventh stalled at three times the pace: the job's
        # median hardly moves, so neither may the spread of it (the sample variance of the ten
        # stretch medians grows about 900-fold).
        rng = np.random.default_rng(3)
        clean = job(rng, level=1.0)
        stalled = clean.copy()
        stalled[24:28] *= 3.0
        calm, hit = intervals.median_estimate(clean), intervals.median_estimate(stalled)
        assert hit.median == pytest.approx(calm.median, rel=0.01)
        assert hit.variance < 2 * calm.variance
        logs = np.log(intervals.block_medians(stalled))
        assert np.var(logs, ddof=1) / logs.size > 100 * hit.variance

    def test_a_coarse_timer_falls_back_to_the_sample_variance(self):
        # More than half the stretch medians equal: the median absolute deviation is zero, and a
        # zero spread would make any difference certain.
        samples = [1.0] * 24 + [1.05] * 16
        estimate = intervals.median_estimate(samples)
        logs = np.log(intervals.block_medians(samples))
        assert estimate.variance == pytest.approx(np.var(logs, ddof=1) / logs.size) and estimate.variance > 0
        assert estimate.df == logs.size - 1

    def test_recorded_blocks_are_used_when_the_harness_kept_them(self):
        samples = [1.0, 1.01, 0.99, 1.1, 1.11, 1.09, 1.2, 1.21, 1.19]
        estimate = intervals.median_estimate(samples, block_ids=[0, 0, 0, 1, 1, 1, 2, 2, 2])
        assert (estimate.blocks, estimate.df, estimate.independent) == (3, 2, True)
        assert estimate.variance == pytest.approx(np.var(np.log([1.0, 1.1, 1.2]), ddof=1) / 3)
        stretches = intervals.median_estimate(samples, block_ids=[0, 1])  # not one id a sample
        assert (stretches.blocks, stretches.independent) == (4, False)

    def test_too_few_or_non_positive_samples_are_refused(self):
        with pytest.raises(ValueError):
            intervals.median_estimate([1.0, 1.1, 1.2])
        with pytest.raises(ValueError):
            intervals.median_estimate([1.0, 0.0, 1.2, 1.1])


class TestDifference:
    def test_the_interval_with_the_process_component_covers_about_95_in_100(self):
        rng = np.random.default_rng(7)
        process_sd, covered = 0.01, 0
        for _ in range(400):
            old = job(rng, level=math.exp(rng.normal(0, process_sd)))
            new = job(rng, level=1.02 * math.exp(rng.normal(0, process_sd)))
            diff = intervals.difference(
                intervals.median_estimate(new), intervals.median_estimate(old), process_variance=process_sd**2
            )
            covered += diff.low <= 0.02 <= diff.high
        assert 0.90 <= covered / 400 <= 0.99

    def test_without_the_process_component_it_covers_far_less(self):
        rng = np.random.default_rng(7)
        covered = 0
        for _ in range(400):
            old = job(rng, level=math.exp(rng.normal(0, 0.01)))
            new = job(rng, level=math.exp(rng.normal(0, 0.01)))
            diff = intervals.difference(intervals.median_estimate(new), intervals.median_estimate(old))
            covered += diff.low <= 0 <= diff.high
        assert covered / 400 < 0.85

    def test_a_shift_moves_the_point_and_both_ends(self):
        estimate = intervals.MedianEstimate(0.0, 1e-4, 9, 10)
        diff = intervals.difference(estimate, estimate).shifted(0.1)
        assert diff.point == pytest.approx(0.1)
        assert diff.low < 0.1 < diff.high

    def test_satterthwaite_gives_the_parts_df_for_one_part_and_more_for_two_equal_ones(self):
        assert intervals.satterthwaite_df([(1.0, 9)]) == pytest.approx(9)
        assert intervals.satterthwaite_df([(1.0, 9), (1.0, 9)]) == pytest.approx(18)
        assert intervals.satterthwaite_df([(1.0, 9), (1.0, math.inf)]) == pytest.approx(36)

    def test_the_pooled_reference_is_narrower_than_one_other_card(self):
        old = intervals.MedianEstimate(0.0, 1e-5, 9, 10)
        others = [intervals.MedianEstimate(math.log(v), 1e-5, 9, 10) for v in (1.01, 0.99, 1.0, 1.02)]
        one = intervals.difference(others[0], old, process_variance=1e-4)
        pooled = intervals.pooled_difference(old, others, process_variance=1e-4)
        assert pooled.standard_error < one.standard_error
        assert pooled.point == pytest.approx(math.expm1(np.mean(np.log([1.01, 0.99, 1.0, 1.02]))))


class TestEquivalenceVerdict:
    @pytest.mark.parametrize(
        ("low", "high", "verdict"),
        [
            (-0.01, 0.02, "agrees"),
            (0.031, 0.05, "disagrees"),
            (-0.09, -0.04, "disagrees"),
            (0.01, 0.04, "inconclusive"),
            (None, None, "inconclusive"),
            (-math.inf, 0.0, "inconclusive"),
        ],
    )
    def test_against_a_three_percent_margin(self, low, high, verdict):
        assert intervals.equivalence_verdict(low, high, 0.03) == verdict


def test_the_quantile_interval_is_distribution_free_and_open_with_too_few_values():
    point, low, high = intervals.quantile_interval(np.arange(200) / 200, q=0.5)
    assert low < point < high
    _, _, high = intervals.quantile_interval(np.arange(20) / 20, q=0.95)
    assert math.isnan(high) or math.isinf(high)


class TestStretchSpread:
    """intervals.stretch_spread takes scipy's median_abs_deviation without its input-checking
    wrapper: the same deviation as the public function, a NaN included."""

    @pytest.mark.parametrize("seed", range(5))
    def test_it_is_scipys_deviation(self, seed):
        from scipy import stats

        logs = np.log(np.random.default_rng(seed).uniform(1.0, 1.2, size=10 + seed))
        variance, df = intervals.stretch_spread(logs)
        assert variance == pytest.approx(stats.median_abs_deviation(logs, scale="normal") ** 2, rel=1e-12)
        assert df == pytest.approx(intervals.MAD_EFFICIENCY * (logs.size - 1))

    def test_a_nan_gives_nan_as_scipy_does(self):
        from scipy import stats

        logs = np.array([0.1, 0.2, np.nan, 0.15, 0.12, 0.11, 0.3, 0.2, 0.18, 0.14])
        assert math.isnan(stats.median_abs_deviation(logs, scale="normal"))
        assert math.isnan(intervals.stretch_spread(logs)[0])
