"""A rerun's verdict (issue 12, part 2): an equivalence judgement on the relative difference of
medians, its 95% interval against ±RERUN_TOLERANCE. Only `agrees` makes a run `reproduced`;
`disagrees` diverges the job and opens an issue report; `inconclusive` changes nothing and says
so. A run is judged under its own protocol: a controlled run on samples against samples, a source
run on upstream's own do_bench figure."""

import copy
import io
import json
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from attestations.models import AuditEntry, IssueReport
from registry.models import BenchmarkRun, EvidenceLevel
from registry.reruns import judged, judgement, tasks
from registry.reruns.controlled import (
    BUNDLED_CONTROLLED_DIR,
    controlled_document_read,
    controlled_runs_export,
    controlled_runs_load,
)
from registry.reruns.models import JobState, RerunJob
from registry.reruns.services import (
    job_claim,
    job_message,
    job_message_check,
    rerun_record_result,
    rerun_rejudge,
    rerun_request,
)
from registry.reruns.services.record import LEVEL_AUDIT_ACTION, reruns_rejudge
from registry.stats import intervals
from tests.reruns.conftest import (
    csv_import,
    geglu_measure_job,
    harness_result,
    row,
    spread_samples,
    worker_key_for_tests,
)

pytestmark = pytest.mark.django_db

CARD_A = "GPU-aaaaaaaa-0000-4000-8000-000000000001"
CARD_B = "GPU-bbbbbbbb-0000-4000-8000-000000000002"


def record(job: RerunJob, result: dict) -> RerunJob:
    claim = job_claim(job_id=job.pk, gpu_slug=job.gpu_slug, worker_host="gpu-host-1")
    assert claim.outcome == "claimed"
    return rerun_record_result(job_id=job.pk, lease=claim.lease, result=result)


def rerun(run: BenchmarkRun, result: dict) -> RerunJob:
    return record(rerun_request(run=run), result)


def noisy(median: float, count: int, seed: int, sigma: float) -> list[float]:
    return list(median * np.random.default_rng(seed).lognormal(0.0, sigma, count))


@pytest.fixture
def controlled_run(h200_run):
    """A run measured under kernelindex-cuda-v1 on card A: 41 samples within ±0.6% of 0.9 ms."""
    job = geglu_measure_job("huggingface", "forward", "latency", workloads=[h200_run.workload])
    measured = record(job, harness_result(0.9, gpu_uuid=CARD_A))
    assert measured.state == JobState.SUCCEEDED
    return measured.result_run


class TestAgrees:
    def test_a_source_run_whose_interval_lies_inside_the_tolerance_is_reproduced(self, h200_run):
        job = rerun(h200_run, harness_result(1.005))

        assert (job.state, job.verdict) == (JobState.SUCCEEDED, "agrees")
        assert -job.tolerance <= job.deviation_low <= job.deviation <= job.deviation_high <= job.tolerance
        assert "The whole interval lies within ±2.0%" in job.verdict_note
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == EvidenceLevel.REPRODUCED
        assert not IssueReport.objects.exists()


class TestDisagrees:
    def test_the_job_diverges_one_issue_report_opens_and_the_level_stays(self, h200_run):
        job = rerun(h200_run, harness_result(1.1))

        assert (job.state, job.verdict) == (JobState.DIVERGED, "disagrees")
        assert job.deviation_low > job.tolerance
        assert "The whole interval lies outside ±2.0%" in job.verdict_note
        report = IssueReport.objects.get()
        assert (report.run_id, report.reporter, report.category) == (h200_run.pk, None, "wrong_value")
        assert f"job #{job.pk}" in report.description and job.verdict_note in report.description
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == EvidenceLevel.REPORTED

    def test_a_reproduced_run_that_a_later_rerun_disagrees_with_keeps_its_level(self, h200_run):
        assert rerun(h200_run, harness_result(1.0)).verdict == "agrees"

        later = rerun(h200_run, harness_result(0.8))

        assert later.state == JobState.DIVERGED
        assert IssueReport.objects.count() == 1
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == EvidenceLevel.REPRODUCED


class TestInconclusive:
    def test_the_level_is_unchanged_and_the_note_says_another_rerun_may_settle_it(self, h200_run):
        # A single upstream call, its spread taken from the rerun's 30 noisy samples (±5%): it
        # lands 0.5% from the record, yet cannot say within ±2%.
        result = harness_result(
            1.005,
            samples=noisy(1.005, 30, seed=4, sigma=0.05),
            upstream={"median": 1.005, "p20": 1.005, "p80": 1.005},
        )
        job = rerun(h200_run, result)

        assert (job.state, job.verdict) == (JobState.SUCCEEDED, "inconclusive")
        assert job.deviation == pytest.approx(0.005)
        assert job.deviation_low < -job.tolerance or job.deviation_high > job.tolerance
        assert job.deviation_low <= job.tolerance and job.deviation_high >= -job.tolerance
        assert "another rerun may settle it" in job.verdict_note
        assert "1 sample (one timed call)" in job.verdict_note
        assert not IssueReport.objects.exists()
        h200_run.refresh_from_db()
        assert h200_run.evidence_level == EvidenceLevel.REPORTED

    def test_no_samples_anywhere_leave_no_interval(self, h200_run, tmp_path):
        from tests.reruns.conftest import csv_import, row

        csv_import(tmp_path / "one-call.csv", [row("liger", "full", y=(2.0, 2.0, 2.0))])
        run = BenchmarkRun.objects.get(implementation__provider="liger", operation_mode="full")
        # An older harness: one call's figure, no samples of its own and no upstream figure.
        job = rerun(run, harness_result(2.0, samples=[], p20=2.0, p80=2.0, upstream={}))

        assert (job.verdict, job.deviation_low, job.deviation_high) == ("inconclusive", None, None)
        assert "no interval" in job.verdict_note
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPORTED

    def test_a_measured_run_stays_measured(self, controlled_run):
        job = rerun(controlled_run, harness_result(0.9, samples=noisy(0.9, 12, seed=2, sigma=0.05)))

        assert job.verdict == "inconclusive", (job.deviation_low, job.deviation_high)
        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.MEASURED


class TestControlledRunsOnSamples:
    def test_a_controlled_run_is_judged_on_samples_against_samples(self, controlled_run):
        measured = spread_samples(0.9)
        again = [s * 1.001 for s in spread_samples(0.9)]
        # Upstream's own do_bench figure is far off; a controlled run is not judged on it.
        job = rerun(
            controlled_run,
            harness_result(0.9009, samples=again, upstream={"median": 2.0, "p20": 2.0, "p80": 2.0}),
        )

        # A cuda-v1 latency rerun on an H200 is judged by the verdict model (registry/stats/).
        model = judgement.verdict_model_for("nvidia-h200")
        key = job.sampling["verdict_model"]["verdict_class"]
        params = model.parameters(key)
        expected = intervals.difference(
            intervals.median_estimate(again),
            intervals.median_estimate(measured),
            confidence=model.verdict_confidence,
        )
        assert model.verdict_confidence == 0.90  # the two one-sided tests at 5%
        assert key == "latency|0.1–1 ms|below the power cap"
        assert job.tolerance == pytest.approx(params.margin)
        assert (job.deviation, job.deviation_low, job.deviation_high) == (
            pytest.approx(expected.point),
            pytest.approx(expected.low),
            pytest.approx(expected.high),
        )
        assert job.deviation == pytest.approx(0.001)
        assert job.deviation_low <= 0.001 <= job.deviation_high
        assert (job.state, job.verdict, job.sampling["basis"]) == (JobState.SUCCEEDED, "agrees", "samples")
        assert job.verdict_note.startswith(
            f"Agrees: within the ±{params.margin:.1%} that two H200 cards differ on 0.1–1 ms ops below the power cap"
        )
        assert "Rerun: 41 samples; recorded run: 41 samples" in job.verdict_note
        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.REPRODUCED

    def test_a_controlled_run_whose_rerun_samples_are_ten_percent_slower_diverges(self, controlled_run):
        job = rerun(
            controlled_run,
            harness_result(
                0.99, samples=spread_samples(0.99), upstream={"median": 0.9, "p20": 0.9, "p80": 0.9}
            ),
        )

        assert (job.state, job.verdict) == (JobState.DIVERGED, "disagrees")
        assert job.deviation == pytest.approx(0.1)
        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.MEASURED

    def test_the_verdict_says_whether_the_same_physical_gpu_measured_both(self, controlled_run):
        same = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_A))
        other = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))

        assert (same.sampling["same_gpu"], other.sampling["same_gpu"]) == (True, False)

    def test_agreeing_on_the_card_that_measured_it_does_not_make_a_run_reproduced(self, controlled_run):
        same = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_A))
        controlled_run.refresh_from_db()
        assert (same.verdict, controlled_run.evidence_level) == ("agrees", EvidenceLevel.MEASURED)

        other = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))
        controlled_run.refresh_from_db()
        assert (other.verdict, controlled_run.evidence_level) == ("agrees", EvidenceLevel.REPRODUCED)

    def test_judging_again_takes_back_a_level_that_rests_on_the_same_card(self, controlled_run):
        same = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_A))
        BenchmarkRun.objects.filter(pk=controlled_run.pk).update(evidence_level=EvidenceLevel.REPRODUCED)

        assert rerun_rejudge(job_id=same.pk) == ("agrees", "agrees")  # the verdict stands

        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.MEASURED

    def test_a_source_run_has_no_card_to_compare_with(self, h200_run):
        assert rerun(h200_run, harness_result(1.0)).sampling["same_gpu"] is None


class TestMemoryPeaks:
    """A memory job's samples are the peaks upstream's `_test_memory` read after each of its 10
    passes. Jobs recorded before 2026-12-02 also kept readings taken inside the first pass (by
    torch.compile compiling): those are left out of the verdict when the last 10 readings give the
    job's upstream figures."""

    COMPILED = [942.3, 1002.3, 1318.8, 1378.8, 1378.8, 1378.8]  # inside the first pass
    PEAK = 1569.5

    @pytest.fixture
    def memory_run(self, tmp_path, db):
        csv_import(tmp_path / "memory.csv", [row("liger", "full", metric="memory", y=(self.PEAK,) * 3)])
        job = geglu_measure_job("liger", "full", "memory")
        figures = {"median": self.PEAK, "p20": self.PEAK, "p80": self.PEAK}
        samples = self.COMPILED + [self.PEAK] * 10
        result = harness_result(self.PEAK, samples=samples, upstream=figures, unit="MB", gpu_uuid=CARD_A)
        measured = record(job, {**result, "p20": self.PEAK, "p80": self.PEAK})
        assert measured.state == JobState.SUCCEEDED
        return measured.result_run

    def test_a_rerun_is_judged_on_upstreams_peaks_and_agrees(self, memory_run):
        again = [1318.8] + [self.PEAK] * 9  # its first pass compiled nothing: only upstream's 10
        job = rerun(memory_run, harness_result(self.PEAK, samples=again, unit="MB", gpu_uuid=CARD_B))

        assert (job.verdict, job.deviation_low, job.deviation_high) == ("agrees", 0.0, 0.0)
        assert "Rerun: 10 samples; recorded run: 10 samples" in job.verdict_note
        assert len(memory_run.measured_by_jobs.get().samples) == 16  # the job keeps what it recorded
        memory_run.refresh_from_db()
        assert memory_run.evidence_level == EvidenceLevel.REPRODUCED

    def test_readings_whose_last_ten_are_not_upstreams_figures_are_taken_as_they_are(self):
        samples = self.COMPILED + [self.PEAK] * 10
        assert judged.memory_peaks(samples, {"median": 1500.0, "p20": 1500.0, "p80": 1500.0}) == samples
        assert judged.memory_peaks(samples, None) == samples
        assert judged.memory_peaks(samples, {"median": "x"}) == samples
        junk = [*self.COMPILED, "x", *[self.PEAK] * 9]  # a worker's JSON, read defensively
        assert judged.memory_peaks(junk, {"median": 1.0, "p20": 1.0, "p80": 1.0}) == junk
        figures = {"median": self.PEAK, "p20": self.PEAK, "p80": self.PEAK}
        assert judged.memory_peaks(samples, figures) == [self.PEAK] * 10
        assert judged.memory_peaks(samples[-10:], figures) == samples[-10:]


class TestWhatTheJobRecords:
    def test_the_job_keeps_the_card_its_state_upstreams_figure_and_how_sampling_stopped(self, h200_run):
        result = harness_result(1.0, gpu_uuid=CARD_B, upstream={"median": 1.001, "p20": 0.999, "p80": 1.003})
        result["gpu_state"]["throttled"] = ["sw_power_cap"]
        result["sampling"].update(stop="budget", precision=0.0071)

        rerun(h200_run, result)

        job = RerunJob.objects.get(run=h200_run)
        assert job.gpu_uuid == CARD_B
        assert job.gpu_state["throttled"] == ["sw_power_cap"]
        assert job.gpu_state["before"]["sm_clock_mhz"] == 1980
        assert job.upstream == {"median": 1.001, "p20": 0.999, "p80": 1.003}
        assert (job.sampling["stop"], job.sampling["precision"]) == ("budget", 0.0071)
        assert job.sampling["setup_s"] == 0.2 and job.sampling["timing_s"] == 0.4
        assert job.samples == result["samples"]
        assert job.tolerance == pytest.approx(0.02)

    def test_a_malformed_upstream_figure_is_not_kept_and_the_protocols_figure_is_judged(self, h200_run):
        result = harness_result(1.1, upstream={"median": 1.0, "p20": "fast"})

        job = rerun(h200_run, result)

        assert job.upstream == {}
        assert job.deviation == pytest.approx(0.1)
        assert job.verdict == "disagrees"


class TestTheRerunAvoidsTheMeasuringCard:
    def test_rerun_request_names_the_card_that_measured_the_run(self, controlled_run):
        job = rerun_request(run=controlled_run)

        assert job.avoid_gpu_uuid == CARD_A

    def test_a_caller_whose_fleet_has_one_card_asks_for_none(self, controlled_run):
        job = rerun_request(run=controlled_run, other_card=False)

        assert job.avoid_gpu_uuid == ""
        assert "avoid_gpu" not in job_message(job)["signed"]

    def test_a_source_run_has_no_card_to_avoid(self, h200_run):
        job = rerun_request(run=h200_run)

        assert job.avoid_gpu_uuid == ""
        assert "avoid_gpu" not in job_message(job)["signed"]

    def test_the_signed_message_carries_the_card_and_the_signature_covers_it(self, controlled_run):
        job = rerun_request(run=controlled_run)
        message = job_message(job)

        assert message["signed"]["avoid_gpu"] == CARD_A
        assert job_message_check(job_id=job.pk, **message) == ""
        tampered = copy.deepcopy(message)
        tampered["signed"]["avoid_gpu"] = CARD_B
        assert job_message_check(job_id=job.pk, **tampered) == "the signature does not match the job spec"

    def test_the_measuring_cards_worker_hands_the_rerun_on_then_runs_it_when_no_other_takes_it(
        self, controlled_run, monkeypatch
    ):
        sent, recorded = [], []
        worker_key_for_tests(gpu_slug="nvidia-h200", cards=(CARD_A, CARD_B))
        monkeypatch.setattr(tasks, "worker_gpu", lambda: ("nvidia-h200", CARD_A))
        monkeypatch.setattr(tasks, "AVOID_PAUSE_S", 0)
        monkeypatch.setattr(tasks.services, "job_send", lambda **kw: sent.append(kw))
        monkeypatch.setattr(tasks, "_harness_run", lambda job_id, claim: harness_result(0.9, gpu_uuid=CARD_A))
        monkeypatch.setattr(tasks.job_report, "apply_async", lambda **kw: recorded.append(kw))
        job = rerun_request(run=controlled_run)
        message = job_message(job)

        outcome = tasks.job_execute.apply(args=[job.pk], kwargs=message).get()

        assert outcome == "other_card"
        assert [(s["queue"], s["message"]["passes"]) for s in sent] == [("gpu.nvidia-h200", 1)]
        assert sent[0]["message"]["signed"] == message["signed"]
        job.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.QUEUED, 0)

        last = {**message, "passes": tasks.AVOID_PASSES}
        assert tasks.job_execute.apply(args=[job.pk], kwargs=last).get() == "ok"
        job.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.RUNNING, 1)
        assert len(recorded) == 1 and len(sent) == 1

    def test_another_cards_worker_runs_it_at_once(self, controlled_run, monkeypatch):
        worker_key_for_tests(gpu_slug="nvidia-h200", cards=(CARD_A, CARD_B))
        monkeypatch.setattr(tasks, "worker_gpu", lambda: ("nvidia-h200", CARD_B))
        monkeypatch.setattr(tasks.services, "job_send", lambda **kw: pytest.fail("handed on"))
        monkeypatch.setattr(tasks, "_harness_run", lambda job_id, claim: harness_result(0.9, gpu_uuid=CARD_B))
        monkeypatch.setattr(tasks.job_report, "apply_async", lambda **kw: None)
        job = rerun_request(run=controlled_run)

        assert tasks.job_execute.apply(args=[job.pk], kwargs=job_message(job)).get() == "ok"
        job.refresh_from_db()
        assert (job.state, job.attempts) == (JobState.RUNNING, 1)


class TestJudgedAgain:
    """rerun_rejudge: a finished rerun judged again, from the samples it keeps, under today's
    statistics; what it had is kept, the level follows the evidence rule, and twice is once."""

    @pytest.fixture
    def drifting(self, controlled_run):
        """A rerun of `controlled_run` on card B, 2% slower, whose samples, like the measurement's,
        drift through the job: stored as "agrees" (as an interval over single samples had it),
        "inconclusive" under today's rule (the drift between blocks crosses the class's margin)."""
        drift = list(np.linspace(1.03, 0.97, 100))
        measure = controlled_run.measured_by_jobs.get()
        RerunJob.objects.filter(pk=measure.pk).update(samples=[0.9 * d for d in drift])
        job = rerun(
            controlled_run, harness_result(0.918, samples=[0.918 * d for d in drift], gpu_uuid=CARD_B)
        )
        assert job.verdict == "inconclusive"
        RerunJob.objects.filter(pk=job.pk).update(
            verdict="agrees", deviation_low=0.002, deviation_high=0.018, verdict_note="judged before batches"
        )
        BenchmarkRun.objects.filter(pk=controlled_run.pk).update(evidence_level=EvidenceLevel.REPRODUCED)
        return job

    def test_the_verdict_changes_the_earlier_one_is_kept_and_the_run_is_no_longer_reproduced(
        self, controlled_run, drifting
    ):
        assert rerun_rejudge(job_id=drifting.pk) == ("agrees", "inconclusive")

        drifting.refresh_from_db()
        controlled_run.refresh_from_db()
        assert (drifting.verdict, drifting.state) == ("inconclusive", JobState.SUCCEEDED)
        assert drifting.deviation_low < 0.02 < drifting.deviation_high
        (earlier,) = drifting.sampling["earlier_judgements"]
        assert (earlier["verdict"], earlier["deviation_high"], earlier["verdict_note"]) == (
            "agrees",
            0.018,
            "judged before batches",
        )
        assert controlled_run.evidence_level == EvidenceLevel.MEASURED
        assert drifting.samples == [0.918 * d for d in np.linspace(1.03, 0.97, 100)]  # measurements untouched

    def test_judging_again_twice_changes_nothing_the_second_time(self, drifting):
        rerun_rejudge(job_id=drifting.pk)
        drifting.refresh_from_db()
        first = (drifting.verdict, drifting.deviation_low, drifting.deviation_high, drifting.sampling)

        assert rerun_rejudge(job_id=drifting.pk) == ("inconclusive", "inconclusive")

        drifting.refresh_from_db()
        assert (drifting.verdict, drifting.deviation_low, drifting.deviation_high, drifting.sampling) == first

    def test_another_agreeing_rerun_keeps_the_run_reproduced(self, controlled_run, drifting):
        other = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))
        RerunJob.objects.filter(pk=other.pk).update(verdict="agrees")  # as its own judgement had it

        rerun_rejudge(job_id=drifting.pk)

        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.REPRODUCED

    def test_a_rerun_that_comes_to_disagree_diverges_and_opens_one_report(self, controlled_run):
        job = rerun(controlled_run, harness_result(0.99, gpu_uuid=CARD_B))
        assert job.verdict == "disagrees" and IssueReport.objects.count() == 1
        RerunJob.objects.filter(pk=job.pk).update(verdict="inconclusive", state=JobState.SUCCEEDED)

        assert rerun_rejudge(job_id=job.pk) == ("inconclusive", "disagrees")
        assert rerun_rejudge(job_id=job.pk) == ("disagrees", "disagrees")

        job.refresh_from_db()
        assert job.state == JobState.DIVERGED
        assert IssueReport.objects.count() == 2  # the first recording's, and this judgement's

    def test_the_command_judges_every_rerun_again_and_says_what_changed(self, controlled_run, drifting):
        out = io.StringIO()
        call_command("rejudge_reruns", "--gpu", "nvidia-h200", stdout=out)

        assert "agrees -> inconclusive 1" in " ".join(out.getvalue().split())
        assert "1 rerun(s) judged again, 1 changed" in out.getvalue()
        controlled_run.refresh_from_db()
        assert controlled_run.evidence_level == EvidenceLevel.MEASURED

    def test_a_job_without_a_verdict_is_not_judged(self, controlled_run):
        job = rerun_request(run=controlled_run)

        assert rerun_rejudge(job_id=job.pk) is None


class TestEveryRerunJudgedAgain:
    """reruns_rejudge (`rejudge_reruns`, `load_bundled_data`): every rerun judged in memory, and
    rerun_rejudge run only where a judgement or a level changes, leaves what rerun_rejudge for every
    job in turn leaves, and writes nothing when nothing changes."""

    def state(self, run: BenchmarkRun) -> tuple:
        def kept(sampling):  # the earlier judgements, less the moment they were replaced
            return [
                {k: v for k, v in e.items() if k != "judged_at"}
                for e in sampling.get("earlier_judgements", [])
            ]

        jobs = [
            (j.pk, j.verdict, j.state, j.deviation_low, j.deviation_high, j.verdict_note, kept(j.sampling))
            for j in RerunJob.objects.filter(kind="rerun").order_by("pk")
        ]
        audited = AuditEntry.objects.filter(action=LEVEL_AUDIT_ACTION).order_by("pk")
        run.refresh_from_db()
        return (
            jobs,
            run.evidence_level,
            list(audited.values_list("object_id", "from_state", "to_state", "reason")),
            IssueReport.objects.count(),
        )

    def test_it_leaves_what_judging_each_rerun_in_turn_leaves(self, controlled_run):
        # Three reruns on card B: one agreeing and stored so, one stored "agrees" that today's rule
        # finds inconclusive, one stored "inconclusive" that agrees today; the run is stored
        # `measured`, which the rule no longer gives. In turn: the level rises at the first (its
        # judgement unchanged), the other two are judged anew.
        drift = list(np.linspace(1.03, 0.97, 100))
        steady = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))
        measure = controlled_run.measured_by_jobs.get()
        RerunJob.objects.filter(pk=measure.pk).update(samples=[0.9 * d for d in drift])
        drifting = rerun(
            controlled_run, harness_result(0.918, samples=[0.918 * d for d in drift], gpu_uuid=CARD_B)
        )
        agreeing = rerun(
            controlled_run, harness_result(0.9, samples=[0.9 * d for d in drift], gpu_uuid=CARD_B)
        )
        RerunJob.objects.filter(pk=drifting.pk).update(verdict="agrees")
        RerunJob.objects.filter(pk__in=[steady.pk, agreeing.pk]).update(verdict="inconclusive")
        RerunJob.objects.filter(pk=steady.pk).update(verdict="agrees")
        BenchmarkRun.objects.filter(pk=controlled_run.pk).update(evidence_level=EvidenceLevel.MEASURED)

        class Undone(Exception):
            pass

        with pytest.raises(Undone), transaction.atomic():
            for pk in RerunJob.objects.filter(kind="rerun").order_by("pk").values_list("pk", flat=True):
                rerun_rejudge(job_id=pk)
            in_turn = self.state(controlled_run)
            raise Undone
        before = self.state(controlled_run)

        reruns_rejudge()

        assert self.state(controlled_run) == in_turn != before
        jobs, level, audited, _ = in_turn
        assert [verdict for _, verdict, *_ in jobs] == [
            "agrees",
            "inconclusive",
            "agrees",
        ] and level == "reproduced"
        assert audited[-1] == (
            controlled_run.pk,
            "measured",
            "reproduced",
            f"Rerun job #{steady.pk} judged again.",
        )

    def test_a_level_the_rule_no_longer_gives_is_settled_at_the_runs_first_rerun_then_nothing_is_written(
        self, controlled_run
    ):
        first = rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))
        rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B))
        controlled_run.refresh_from_db()
        assert first.verdict == "agrees" and controlled_run.evidence_level == EvidenceLevel.REPRODUCED
        BenchmarkRun.objects.filter(pk=controlled_run.pk).update(evidence_level=EvidenceLevel.MEASURED)

        assert reruns_rejudge() == Counter({("agrees", "agrees"): 2})

        _, level, audited, _ = self.state(controlled_run)
        assert level == EvidenceLevel.REPRODUCED
        judged_again = [entry for entry in audited if entry[3].endswith("judged again.")]
        assert judged_again == [
            (controlled_run.pk, "measured", "reproduced", f"Rerun job #{first.pk} judged again.")
        ]
        with CaptureQueriesContext(connection) as queries:
            assert reruns_rejudge() == Counter({("agrees", "agrees"): 2})
        # Each chunk of runs is judged in a transaction of its own (a savepoint inside the test's):
        # nothing is written in it.
        read_or_bracket = ("SELECT", "SAVEPOINT", "RELEASE SAVEPOINT")
        written = [q["sql"] for q in queries if not q["sql"].lstrip().upper().startswith(read_or_bracket)]
        assert written == []
        assert any(q["sql"].lstrip().upper().startswith("SELECT") for q in queries)


def shipped_entry(level: str) -> dict:
    """One run of the shipped H200 file at `level`, with its measure job and one succeeded rerun."""
    document = controlled_document_read(BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
    entry = next(
        e
        for e in document["runs"]
        if e["run"]["evidence_level"] == level
        and any(j["role"] == "rerun" and j["state"] == "succeeded" for j in e["jobs"])
    )
    return {**document, "runs": [entry]}


def load(document: dict, tmp_path) -> BenchmarkRun:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(document))
    controlled_runs_load(path=path)
    return BenchmarkRun.objects.get(digest=document["runs"][0]["run"]["digest"])


class TestTheLoaderAsksForAVerdict:
    @pytest.fixture
    def reproduced_entry(self):
        document = shipped_entry("reproduced")
        reruns = [j for j in document["runs"][0]["jobs"] if j["role"] == "rerun"]
        for job in reruns:
            job.pop("verdict", None)  # judged by the old fixed tolerance: no verdict
        return document

    def test_a_reproduced_run_whose_reruns_have_no_verdict_loads_at_measured_with_its_history(
        self, reproduced_entry, tmp_path
    ):
        run = load(reproduced_entry, tmp_path)

        assert run.evidence_level == EvidenceLevel.MEASURED
        history = RerunJob.objects.filter(run=run, kind="rerun")
        assert history.count() == len(
            [j for j in reproduced_entry["runs"][0]["jobs"] if j["role"] == "rerun"]
        )
        assert history.filter(state=JobState.SUCCEEDED).exists()

    def test_an_inconclusive_verdict_does_not_carry_the_level_either(self, reproduced_entry, tmp_path):
        for job in reproduced_entry["runs"][0]["jobs"]:
            if job["role"] == "rerun":
                job["verdict"] = "inconclusive"

        assert load(reproduced_entry, tmp_path).evidence_level == EvidenceLevel.MEASURED

    def test_a_reproduced_run_with_an_agreeing_verdict_stays_reproduced(self, reproduced_entry, tmp_path):
        rerun_job = next(
            j
            for j in reproduced_entry["runs"][0]["jobs"]
            if j["role"] == "rerun" and j["state"] == "succeeded"
        )
        rerun_job.update(verdict="agrees", deviation_low=-0.004, deviation_high=0.006)

        run = load(reproduced_entry, tmp_path)

        assert run.evidence_level == EvidenceLevel.REPRODUCED
        assert RerunJob.objects.get(run=run, verdict="agrees").deviation_high == 0.006

    def test_a_reproduced_run_that_agreed_only_on_its_measuring_card_loads_at_measured(
        self, reproduced_entry, tmp_path
    ):
        for job in reproduced_entry["runs"][0]["jobs"]:
            if job["role"] == "rerun":
                job.update(verdict="agrees", sampling={**(job.get("sampling") or {}), "same_gpu": True})

        run = load(reproduced_entry, tmp_path)

        assert run.evidence_level == EvidenceLevel.MEASURED
        assert RerunJob.objects.filter(run=run, verdict="agrees").exists()  # the verdicts are kept

    def test_a_run_reproduced_here_exports_and_loads_reproduced_elsewhere(self, controlled_run, tmp_path):
        assert rerun(controlled_run, harness_result(0.9, gpu_uuid=CARD_B)).verdict == "agrees"
        document = controlled_runs_export(runs=BenchmarkRun.objects.filter(pk=controlled_run.pk))
        digest = controlled_run.digest
        RerunJob.objects.all().delete()
        BenchmarkRun.objects.filter(pk=controlled_run.pk).delete()

        path = tmp_path / "export.json"
        path.write_text(json.dumps(document))
        controlled_runs_load(path=path)

        loaded = BenchmarkRun.objects.get(digest=digest)
        assert loaded.evidence_level == EvidenceLevel.REPRODUCED
        job = RerunJob.objects.get(run=loaded)
        assert (job.verdict, job.gpu_uuid) == ("agrees", CARD_B)


class TestJudgedUnderTodaysRule:
    """reruns_rejudge(every=False), as `load_bundled_data` calls it: a rerun already judged under
    today's rule (its `judged_under`) is passed over, a changed rule makes every rerun due again,
    and a file's say that its verdicts are today's is not taken."""

    def test_a_second_pass_judges_none_and_a_changed_tolerance_judges_every_one_again(
        self, tmp_path, settings
    ):
        load(shipped_entry("reproduced"), tmp_path)
        reruns = RerunJob.objects.filter(kind="rerun").exclude(verdict="")
        count = reruns.count()
        assert count and not reruns.filter(judged_under=judgement.judgement_rule()).exists()

        assert sum(reruns_rejudge(every=False).values()) == count
        assert set(reruns.values_list("judged_under", flat=True)) == {judgement.judgement_rule()}
        assert sum(reruns_rejudge(every=False).values()) == 0
        assert sum(reruns_rejudge().values()) == count  # `rejudge_reruns` still judges every one

        settings.RERUN_TOLERANCE *= 2
        assert sum(reruns_rejudge(every=False).values()) == count

    def test_a_change_to_the_judging_code_changes_the_rule(self, monkeypatch):
        before = judgement.judgement_rule()
        monkeypatch.setattr(judgement, "RULE_MODULES", (*judgement.RULE_MODULES, "registry.rows"))
        judgement._rule_of_code.cache_clear()
        try:
            assert judgement.judgement_rule() != before
        finally:
            monkeypatch.undo()
            judgement._rule_of_code.cache_clear()
        assert judgement.judgement_rule() == before

    def test_a_files_stamp_is_not_taken_and_an_export_carries_none(self, tmp_path):
        document = shipped_entry("reproduced")
        for job in document["runs"][0]["jobs"]:
            job["judged_under"] = judgement.judgement_rule()

        run = load(document, tmp_path)

        assert set(RerunJob.objects.values_list("judged_under", flat=True)) == {""}
        reruns_rejudge(every=False)
        exported = controlled_runs_export(runs=BenchmarkRun.objects.filter(pk=run.pk))
        assert all("judged_under" not in job for entry in exported["runs"] for job in entry["jobs"])
