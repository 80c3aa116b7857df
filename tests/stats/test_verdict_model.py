"""registry/stats/verdict_model.py: classes, the host-bound rule, the fits of the between-process
component and of the margin, leave-one-kernel-out, the shift test, and the shipped model."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from registry.stats import intervals, verdict_model

SHIPPED = Path(__file__).resolve().parents[2] / "registry" / "data" / "verdict-model-nvidia-h200.json"
KEY = "latency|1–10 ms|below the power cap"


def estimate(log_median: float, variance: float = 1e-6) -> intervals.MedianEstimate:
    return intervals.MedianEstimate(log_median, variance, 9, 10)


def pairs(rng, *, count: int, process_sd: float, card_sd: float, kernel: str = "k", key: str = KEY):
    """Reruns on the same card (process noise) and on another card (process and card noise)."""
    out = []
    for i in range(count):
        same = i % 2 == 0
        offset = 0.0 if same else rng.normal(0, card_sd * math.sqrt(2))
        ratio = offset + rng.normal(0, process_sd * math.sqrt(2))
        out.append(
            verdict_model.Pair(
                kernel,
                f"w{i}",
                key,
                same,
                estimate(ratio),
                estimate(0.0),
                ("GPU-a", "GPU-a" if same else "GPU-b"),
            )
        )
    return out


class TestClasses:
    def test_bands_follow_the_runs_median(self):
        assert [verdict_model.band(m) for m in (0.05, 0.5, 5, 50)] == [
            "under 0.1 ms",
            "0.1–1 ms",
            "1–10 ms",
            "10 ms and over",
        ]

    def test_the_power_cap_is_read_after_the_timing_not_before(self):
        assert verdict_model.power_capped({"before": {"reasons": []}, "after": {"reasons": ["sw_power_cap"]}})
        assert not verdict_model.power_capped(
            {"before": {"reasons": ["sw_power_cap"]}, "after": {"reasons": []}}
        )

    def test_the_power_cap_sampled_through_the_timing_counts_when_half_a_blocks_readings_name_it(self):
        state = {"blocks": [{"reasons": {"sw_power_cap": 0.2}}, {"reasons": {"sw_power_cap": 0.6}}]}
        assert verdict_model.power_capped(state)
        assert not verdict_model.power_capped(
            {"blocks": [{"reasons": {"sw_power_cap": 0.4}}, {"reasons": {}}]}
        )

    def test_host_bound_is_its_own_class_in_words_a_visitor_reads(self):
        key = verdict_model.class_key(
            metric="latency", median_ms=5, capped=True, host_bound=verdict_model.PACED
        )
        assert verdict_model.class_words(key) == "ops whose timed pass the host paces"
        assert verdict_model.is_paced(key) and not verdict_model.is_gpu_timed(key)
        waits = verdict_model.class_key(
            metric="latency", median_ms=5, capped=True, host_bound=verdict_model.WAITS
        )
        assert verdict_model.class_words(waits) == "1–10 ms ops whose timed pass waits on the host"
        assert not verdict_model.is_paced(waits) and not verdict_model.is_gpu_timed(waits)
        assert verdict_model.class_words(KEY) == "1–10 ms ops below the power cap"
        assert verdict_model.is_gpu_timed(KEY) and not verdict_model.is_paced(KEY)

    def test_a_rerun_on_another_kind_of_host_is_its_own_class_judged_apart(self):
        one = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_threads": 16}
        two = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_threads": 32}
        assert verdict_model.host_kind(one) == "Intel(R) Xeon(R) Processor, 16 threads"
        assert verdict_model.hosts_differ([two, one]) and not verdict_model.hosts_differ([one, dict(one)])
        # A side whose host is not recorded (older jobs, a contributor's file) tells nothing.
        assert not verdict_model.hosts_differ([two, {}]) and not verdict_model.hosts_differ([two, None])
        key = verdict_model.class_key(
            metric="latency", median_ms=0.05, capped=True, host_bound="", hosts_differ=True
        )
        assert key == "latency|timed on two kinds of host|under 0.1 ms"
        assert verdict_model.class_words(key) == "under 0.1 ms ops timed on two kinds of host"
        assert not verdict_model.is_gpu_timed(key) and not verdict_model.is_paced(key)
        # The host's pace is the stronger reason: such a pair stays in its host-bound class.
        waits = verdict_model.class_key(
            metric="latency", median_ms=5, capped=False, host_bound=verdict_model.WAITS, hosts_differ=True
        )
        assert waits == "latency|waits on the host|1–10 ms"

    def test_the_words_state_verdict_margin_and_class(self):
        words = verdict_model.verdict_words("agrees", KEY, 0.031, 0.042)
        assert (
            words == "agrees: within the ±3.1% that two H200 cards differ on 1–10 ms ops below the power cap"
        )
        words = verdict_model.verdict_words("disagrees", KEY, 0.031, 0.042)
        assert words == (
            "disagrees: beyond the ±3.1% that two H200 cards differ on 1–10 ms ops below the power cap, "
            "and beyond ±4.2%, the top of that margin's 95% interval"
        )


def judged(margin: float, top: float, log_ratio: float, variance: float) -> verdict_model.Judged:
    """One rerun judged in a class of `margin` whose margin's interval ends at `top`."""
    params = verdict_model.ClassParameters(0.0, math.inf, "", margin, "", 200, (margin * 0.9, top))
    model = verdict_model.Model(gpu="x", confidence=0.95, classes={KEY: params})
    return verdict_model.judge(model, KEY, estimate(log_ratio, variance), estimate(0.0, variance))


class TestVerdictRule:
    def test_a_difference_beyond_the_margin_but_not_beyond_its_intervals_top_is_inconclusive(self):
        # +3.6%, tightly measured: beyond the ±3% margin, within ±4.5%, the top of its interval
        assert judged(0.03, 0.045, math.log(1.036), 1e-8).verdict == "inconclusive"
        assert judged(0.03, 0.045, math.log(1.06), 1e-8).verdict == "disagrees"
        assert judged(0.03, 0.045, math.log(1.02), 1e-8).verdict == "agrees"

    def test_agreement_reads_the_90_percent_interval_the_two_one_sided_tests_at_5_percent_read(self):
        # each side's variance of the log median puts the difference's standard error at 1%
        variance, log_ratio = 0.5e-4, math.log(1.012)
        result = judged(0.03, 0.045, log_ratio, variance)
        assert result.verdict == "agrees" and result.difference.high < 0.03
        # the same difference read at 95% would cross the margin
        wide = intervals.difference(estimate(log_ratio, variance), estimate(0.0, variance), confidence=0.95)
        assert wide.high > 0.03

    def test_an_equivalence_rule_without_a_bound_disagrees_beyond_the_tolerance_itself(self):
        assert intervals.equivalence_verdict(0.025, 0.03, 0.02) == "disagrees"
        assert intervals.equivalence_verdict(0.025, 0.03, 0.02, 0.04) == "inconclusive"
        # a bound inside the tolerance cannot make a rerun within it disagree
        assert intervals.equivalence_verdict(0.015, 0.019, 0.02, 0.01) == "agrees"


class TestHostBound:
    def test_a_wait_named_in_upstreams_code_makes_its_passes_host_bound(self):
        reason = verdict_model.host_bound_reason(
            kernel="fused_moe", provider="huggingface", mode="forward", sampling={}, sample_count=40
        )
        assert "nonzero()" in reason

    def test_a_pass_without_the_wait_is_gpu_timed_unless_its_calls_say_otherwise(self):
        common = {"kernel": "cross_entropy", "provider": "liger", "mode": "backward", "sample_count": 40}
        assert "torch.equal" in verdict_model.host_bound_reason(**common, sampling={})
        forward_only = {"kernel": "fused_moe", "provider": "liger", "mode": "backward", "sample_count": 40}
        assert verdict_model.host_bound_reason(**forward_only, sampling={"host_paced_samples": 19}) == ""
        assert "20 of its 40 calls" in verdict_model.host_bound_reason(
            **forward_only, sampling={"host_paced_samples": 20}
        )

    def test_a_job_from_before_the_pace_was_read_is_host_bound_when_its_spin_hit_the_cap(self):
        common = {"kernel": "geglu", "provider": "liger", "mode": "full", "sample_count": 40}
        assert verdict_model.host_bound_reason(**common, sampling={"lead_cycles": 40_000_000})
        assert not verdict_model.host_bound_reason(**common, sampling={"lead_cycles": 39_999_999})

    def test_a_loop_or_half_the_calls_host_paced_is_paced_one_wait_a_call_only_waits(self):
        kind = lambda kernel, provider, mode, **sampling: verdict_model.host_bound(  # noqa: E731
            kernel=kernel, provider=provider, mode=mode, sampling=sampling, sample_count=40
        )[0]
        assert kind("fused_neighborhood_attention", "torch", "forward") == verdict_model.PACED
        assert kind("cross_entropy", "liger", "backward") == verdict_model.WAITS
        assert kind("cross_entropy", "liger", "backward", host_paced_samples=20) == verdict_model.PACED
        assert kind("geglu", "liger", "full", lead_cycles=40_000_000) == verdict_model.WAITS
        assert kind("geglu", "liger", "full", host_paced_samples=3, lead_cycles=40_000_000) == ""

    def test_a_job_whose_calls_mostly_stalled_is_paced_whatever_its_spin_or_pace_reading(self):
        common = {"kernel": "relu_squared", "provider": "liger", "mode": "backward", "sampling": {}}
        steady = [0.0110 + 0.0001 * (i % 3) for i in range(40)]
        stalled = steady[:19] + [0.3] * 21  # 21 of 40 calls at about 27 times the fastest
        assert verdict_model.host_bound(**common, sample_count=40, samples=steady) == ("", "")
        kind, why = verdict_model.host_bound(**common, sample_count=40, samples=stalled)
        assert kind == verdict_model.PACED and "21 of its 40 calls" in why
        # Under half stalled, or too few samples to tell, stays GPU-timed.
        assert verdict_model.host_bound(**common, sample_count=40, samples=steady[:21] + [0.3] * 19)[0] == ""
        assert verdict_model.host_bound(**common, sample_count=10, samples=stalled[-10:])[0] == ""
        assert verdict_model.erratic_calls([0.01, None, "x", float("nan")] * 10) == 0

    def test_a_pair_is_paced_if_either_side_is_else_waits_if_either_does(self):
        paced, waits, gpu = (verdict_model.PACED, "a"), (verdict_model.WAITS, "b"), ("", "")
        assert verdict_model.pair_host_bound([waits, paced]) == paced
        assert verdict_model.pair_host_bound([gpu, waits]) == waits
        assert verdict_model.pair_host_bound([gpu, gpu]) == gpu


class TestFits:
    def test_the_process_component_is_recovered_from_same_card_reruns(self):
        rng = np.random.default_rng(3)
        data = pairs(rng, count=2000, process_sd=0.01, card_sd=0.02)
        sd, df, source = verdict_model.fit_process_component(data, KEY)
        assert sd == pytest.approx(0.01, rel=0.15)
        assert df == 999 and source.startswith("1000 same-card reruns of 1–10 ms ops")

    def test_the_margin_is_the_95th_percentile_of_how_far_apart_two_cards_put_a_median(self):
        rng = np.random.default_rng(4)
        data = pairs(rng, count=400, process_sd=0.002, card_sd=0.01)
        margin, count, low, high, source = verdict_model.fit_margin(data, KEY)
        apart = [abs(math.expm1(p.log_ratio)) for p in data if not p.same_card]
        assert margin == pytest.approx(np.quantile(apart, 0.95))
        assert count == 200 and low < margin < high
        assert source == "200 pairs of cards on 1–10 ms ops below the power cap"

    def test_a_class_too_few_to_bound_its_95th_percentile_is_measured_on_its_band(self):
        rng = np.random.default_rng(5)
        few = "latency|10 ms and over|below the power cap"
        capped = "latency|10 ms and over|at the power cap"
        data = (
            pairs(rng, count=80, process_sd=0.002, card_sd=0.01, key=few)
            + pairs(rng, count=100, process_sd=0.002, card_sd=0.01, key=capped)
            + pairs(rng, count=400, process_sd=0.002, card_sd=0.01)
        )
        *_, source = verdict_model.fit_margin(data, few)
        assert source == "90 pairs of cards on 10 ms and over ops at and below the power cap"
        *_, source = verdict_model.fit_margin(data, KEY)
        assert source == "200 pairs of cards on 1–10 ms ops below the power cap"

    def test_reruns_on_two_kinds_of_host_take_their_margin_from_such_pairs_not_from_the_gpu_timed(self):
        rng = np.random.default_rng(6)
        across = "latency|timed on two kinds of host|1–10 ms"
        data = pairs(rng, count=400, process_sd=0.002, card_sd=0.01) + pairs(
            rng, count=60, process_sd=0.002, card_sd=0.05, key=across
        )
        data += pairs(
            rng,
            count=100,
            process_sd=0.002,
            card_sd=0.05,
            key="latency|timed on two kinds of host|10 ms and over",
        )
        wide, count, *_, source = verdict_model.fit_margin(data, across)
        assert (
            source == "80 pairs of cards on ops of 1 ms and over timed on two kinds of host" and count == 80
        )
        narrow, *_ = verdict_model.fit_margin(data, KEY)
        assert wide > 2 * narrow  # the GPU-timed class's margin is not widened by them


class TestRerunInterval:
    def test_a_job_of_independent_blocks_carries_no_component_one_of_stretches_does(self):
        model = verdict_model.Model.from_json(json.loads(SHIPPED.read_text()))
        stretches = intervals.MedianEstimate(0.0, 1e-6, 9, 10)
        blocks = intervals.MedianEstimate(0.0, 1e-6, 9, 10, independent=True)
        low, high = verdict_model.rerun_interval(model, KEY, stretches)
        block_low, block_high = verdict_model.rerun_interval(model, KEY, blocks)
        assert block_low > low and block_high < high
        component = model.parameters(KEY).process_sd
        assert high > math.exp(1.96 * math.sqrt(2) * component)  # the component, once for each process
        assert block_high < math.exp(3 * math.sqrt(2e-6))  # the blocks alone

    def test_a_pair_with_neither_difference_nor_variance_does_not_stop_the_fit(self):
        same = [
            verdict_model.Pair("k", f"w{i}", KEY, True, estimate(0.0, 0.0), estimate(0.0, 0.0), ("a", "a"))
            for i in range(50)
        ]
        sd, *_ = verdict_model.fit_process_component(same, KEY)
        assert sd == 0.0


class TestChecks:
    def test_a_shift_of_ten_percent_disagrees_and_none_agrees(self):
        rng = np.random.default_rng(6)
        data = pairs(rng, count=400, process_sd=0.002, card_sd=0.01)
        model = verdict_model.fit(data, gpu="nvidia-h200")
        cross = [p for p in data if not p.same_card]
        plain = verdict_model.verdicts(model, cross)
        shifted = verdict_model.verdicts(model, cross, shift=0.10)
        assert plain.count("agrees") / len(cross) > 0.8
        assert shifted.count("disagrees") / len(cross) > 0.95 and "agrees" not in shifted

    def test_leave_one_kernel_out_judges_each_kernel_by_a_model_that_never_saw_it(self):
        rng = np.random.default_rng(8)
        calm = pairs(rng, count=200, process_sd=0.001, card_sd=0.003, kernel="calm")
        wild = pairs(rng, count=200, process_sd=0.001, card_sd=0.05, kernel="wild")
        out = verdict_model.leave_one_kernel_out(calm + wild, gpu="x", select=lambda p: not p.same_card)
        # the wild kernel, judged by the calm one's narrow margin, mostly does not agree; the calm
        # one, by the wild one's wide margin, agrees
        assert out[100:].count("agrees") < 50 and out[:100].count("agrees") > 95

    def test_coverage_of_the_interval_for_a_rerun_is_near_its_confidence(self):
        rng = np.random.default_rng(9)
        data = pairs(rng, count=1000, process_sd=0.01, card_sd=0.01)
        model = verdict_model.fit(data, gpu="x")
        assert 0.9 <= verdict_model.coverage(model, [p for p in data if p.same_card]) <= 0.99

    def test_card_offsets_are_each_cards_distance_from_the_others_median(self):
        rows = [("A", "w1", 0.02), ("B", "w1", 0.0), ("C", "w1", 0.0), ("A", "w2", 0.01), ("B", "w2", 0.0)]
        offsets = verdict_model.card_offsets(rows)
        assert offsets["A"] == pytest.approx([0.02, 0.01])
        assert offsets["B"] == pytest.approx([-0.01, -0.01])


class TestShippedModel:
    def test_it_round_trips_and_every_class_has_a_margin_and_its_source(self):
        document = json.loads(SHIPPED.read_text())
        model = verdict_model.Model.from_json(document)
        assert model.to_json() == document
        for key, params in model.classes.items():
            assert 0 < params.margin < 1 or key.endswith(verdict_model.HOST_BOUND)
            assert "pairs of cards" in params.margin_from and "same-card reruns" in params.process_from


class TestAClassWithoutAMargin:
    """A class whose pairs of cards are too few for a finite interval of their 95th percentile
    (about 60) has no margin: its reruns are inconclusive, and say why."""

    def test_too_few_pairs_give_no_margin_and_name_how_many_there_were(self):
        rng = np.random.default_rng(11)
        few = [p for p in pairs(rng, count=50, process_sd=0.002, card_sd=0.01) if not p.same_card]
        margin, count, *_, margin_from = verdict_model.fit_margin(few, KEY)
        assert math.isnan(margin) and count == 0
        assert margin_from == "25 pairs of cards on 1–10 ms ops below the power cap, too few for a margin"

    def test_its_rerun_is_inconclusive_however_close_and_the_model_writes_no_nan(self):
        rng = np.random.default_rng(12)
        model = verdict_model.fit(
            [p for p in pairs(rng, count=50, process_sd=0.002, card_sd=0.01) if not p.same_card],
            gpu="nvidia-h100-80gb-hbm3",
            gpu_name="H100 80GB HBM3",
        )
        judged = verdict_model.judge(model, KEY, estimate(0.0), estimate(0.0), gpu_name=model.gpu_name)
        assert judged.verdict == "inconclusive"
        assert judged.words.startswith(
            "inconclusive: no margin for 1–10 ms ops below the power cap on H100 80GB HBM3 cards yet: 25 pairs"
        )
        document = model.to_json()
        assert document["classes"][KEY]["margin"] is None and document["gpu_name"] == "H100 80GB HBM3"
        assert "NaN" not in json.dumps(document)
        assert verdict_model.Model.from_json(document).to_json() == document


class TestTwoCompiledPrograms:
    """Two jobs of a compiled problem that TorchDynamo compiled for different sizes timed two
    programs, not one thing twice: their pair is a class apart, never judged against a margin."""

    STATIC = {"program": {"sizes": {"L['x']": [128, 4096]}, "dynamic": False}}
    SYMBOLIC = {"program": {"sizes": {"L['x']": ["s", 4096]}, "dynamic": True}}

    def pair(self, measure: dict, rerun: dict) -> str:
        return verdict_model.pair_class(
            kernel="kernelbench-l1-23-softmax",
            provider="compile-inductor-default",
            mode="forward",
            metric="latency",
            median_ms=6.5,
            jobs=[{"sampling": measure, "samples": [6.5] * 30}, {"sampling": rerun, "samples": [6.5] * 30}],
        )[0]

    def test_different_sizes_are_two_programs_the_same_sizes_one(self):
        assert self.pair(self.STATIC, self.SYMBOLIC) == "latency|two compiled programs|1–10 ms"
        assert self.pair(self.SYMBOLIC, dict(self.SYMBOLIC)) == "latency|1–10 ms|below the power cap"
        # A side with no program recorded (eager, or a line the replay could not place) tells nothing.
        assert self.pair(self.STATIC, {}) == "latency|1–10 ms|below the power cap"
        assert not verdict_model.programs_differ([self.STATIC, {"program": "junk"}, None])
        key = self.pair(self.STATIC, self.SYMBOLIC)
        assert not verdict_model.is_gpu_timed(key) and not verdict_model.is_paced(key)
        assert verdict_model.class_words(key) == "1–10 ms ops compiled into two different programs"

    def test_it_is_inconclusive_however_close_and_no_fit_gives_it_a_margin(self):
        rng = np.random.default_rng(13)
        apart = "latency|two compiled programs|1–10 ms"
        rows = pairs(rng, count=200, process_sd=0.002, card_sd=0.005)
        rows += pairs(rng, count=200, process_sd=0.002, card_sd=0.5, key=apart)
        model = verdict_model.fit(rows, gpu="nvidia-h100-80gb-hbm3", gpu_name="H100 80GB HBM3")
        assert apart not in model.classes
        assert model.parameters(KEY).margin < 0.05  # the two programs' spread is not the cards'
        judged = verdict_model.judge(model, apart, estimate(0.0), estimate(0.0))
        assert judged.verdict == "inconclusive" and judged.words == verdict_model.PROGRAMS_WORDS
        assert math.isnan(judged.margin)
