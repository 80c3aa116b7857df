"""Issue 35 on the site: every verdict of the model states its class, its margin and where the
margin came from (run page, API); a host-bound run says it includes the host's pace and is never
reproduced; the pooled reference and the card-to-card spread; the fleet page and its API, in a
constant number of queries."""

import html

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry.models import BenchmarkRun, EvidenceLevel
from registry.reruns.models import JobState
from registry.reruns.services import job_claim, rerun_record_result, rerun_rejudge, rerun_request
from tests.reruns.conftest import geglu_measure_job, harness_result, spread_samples

pytestmark = pytest.mark.django_db
CARDS = [f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-00000000000{i}" for i in range(1, 6)]


def record(job, result):
    claim = job_claim(job_id=job.pk, gpu_slug=job.gpu_slug, worker_host="gpu-host-1")
    return rerun_record_result(job_id=job.pk, lease=claim.lease, result=result)


def measured_run(h200_run, *, median=0.9, sampling=None, provider="huggingface"):
    job = geglu_measure_job(provider, "forward", "latency", workloads=[h200_run.workload])
    result = harness_result(median, gpu_uuid=CARDS[0])
    result["sampling"].update(sampling or {})
    return record(job, result).result_run


def rerun_on(run, card, median, **sampling):
    result = harness_result(median, samples=spread_samples(median), gpu_uuid=card)
    result["sampling"].update(sampling)
    return record(rerun_request(run=run), result)


class TestVerdictsStateTheirClass:
    def test_the_api_and_page_give_class_margin_and_its_source(self, client, h200_run):
        run = measured_run(h200_run)
        job = rerun_on(run, CARDS[1], 0.9018)
        account = job.sampling["verdict_model"]
        assert account["verdict_class"] == "latency|0.1–1 ms|below the power cap"
        assert job.verdict == "agrees"

        data = client.get(reverse("run-detail", args=[run.pk])).json()
        rerun = data["reruns"][0]
        assert rerun["verdict_class"] == account["verdict_class"]
        assert rerun["class_words"] == "0.1–1 ms ops below the power cap"
        assert "pairs of cards on 0.1–1 ms ops below the power cap" in rerun["margin_from"]
        assert rerun["tolerance"] == pytest.approx(account["margin"])
        words = f"within the ±{account['margin']:.1%} that two H200 cards differ on 0.1–1 ms ops below the power cap"
        assert words in rerun["verdict_summary"]
        assert (data["host_bound"], rerun["host_bound"]) == (False, False)

        page = client.get(reverse("registry:run-detail", args=[run.pk])).content.decode()
        assert words in page
        job_page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
        assert "0.1–1 ms ops below the power cap, measured on" in job_page

    def test_a_ten_percent_slower_rerun_disagrees_under_the_model(self, client, h200_run):
        run = measured_run(h200_run)
        job = rerun_on(run, CARDS[1], 0.99)
        assert (job.verdict, job.state) == ("disagrees", JobState.DIVERGED)
        # It disagrees beyond the top of the margin's interval, and the API and pages say so.
        account = job.sampling["verdict_model"]
        assert account["margin"] < account["disagree_beyond"] < job.deviation_low
        rerun = client.get(reverse("run-detail", args=[run.pk])).json()["reruns"][0]
        assert rerun["disagree_beyond"] == pytest.approx(account["disagree_beyond"])
        assert rerun["verdict_confidence"] == pytest.approx(0.90)
        assert rerun["verdict_summary"].startswith("disagrees: +10.00% (90% interval ")
        top = f"and beyond ±{account['disagree_beyond']:.1%}, the top of that margin's 95% interval"
        assert top in rerun["verdict_summary"]
        page = client.get(reverse("registry:run-detail", args=[run.pk])).content.decode()
        assert html.escape(top) in page
        job_page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
        assert f"whole 90% interval beyond ±{account['disagree_beyond']:.1%}" in job_page


class TestHostBound:
    def test_a_host_bound_run_is_labelled_judged_apart_and_never_reproduced(self, client, h200_run):
        run = measured_run(h200_run, sampling={"host_paced_samples": 30})
        job = rerun_on(run, CARDS[1], 0.9)
        assert job.sampling["verdict_model"]["verdict_class"] == "latency|host-bound"
        assert job.verdict == "agrees" and not job.raises_level
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.MEASURED

        data = client.get(reverse("run-detail", args=[run.pk])).json()
        assert data["host_bound"] is True and "30 of its 41 calls" in data["host_bound_reason"]
        page = client.get(reverse("registry:run-detail", args=[run.pk])).content.decode()
        assert "Includes the host's pace." in page
        assert data["host_paced"] is True and "never make it <em>reproduced</em>" in page
        job_page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
        assert "agrees</span> in the class of ops the host paces" in job_page

    def test_a_run_that_waits_on_the_host_is_judged_in_its_own_class_and_may_be_reproduced(
        self, client, h200_run
    ):
        # A job from before the host's pace was read, whose spin reached its cap: one wait a call.
        run = measured_run(h200_run, sampling={"lead_cycles": 40_000_000})
        job = rerun_on(run, CARDS[1], 0.9)
        account = job.sampling["verdict_model"]
        assert account["verdict_class"] == "latency|waits on the host|0.1–1 ms"
        assert account["host_bound"] and account["host_paced"] is False
        assert "0.1–1 ms ops whose timed pass waits on the host" in account["words"]
        assert job.verdict == "agrees" and job.raises_level
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPRODUCED

        data = client.get(reverse("run-detail", args=[run.pk])).json()
        assert (data["host_bound"], data["host_paced"]) == (True, False)
        page = client.get(reverse("registry:run-detail", args=[run.pk])).content.decode()
        assert "Includes the host's pace." in page and "never count in the GPU's agreement" in page

    def test_a_rerun_on_another_kind_of_host_is_judged_in_its_own_class_and_says_so(self, client, h200_run):
        job = geglu_measure_job("huggingface", "forward", "latency", workloads=[h200_run.workload])
        result = harness_result(0.9, gpu_uuid=CARDS[0])
        result["environment"].update(cpu="Intel(R) Xeon(R) Processor", cpu_threads=32)
        run = record(job, result).result_run
        rerun = harness_result(0.9018, samples=spread_samples(0.9018), gpu_uuid=CARDS[1])
        rerun["environment"].update(cpu="Intel(R) Xeon(R) Processor", cpu_threads=16)
        judged = record(rerun_request(run=run), rerun)
        account = judged.sampling["verdict_model"]
        assert account["verdict_class"] == "latency|timed on two kinds of host|0.1–1 ms"
        assert "0.1–1 ms ops timed on two kinds of host" in account["words"]
        assert not account["host_bound"]  # the figure is the GPU's; the pair's hosts differ
        assert judged.verdict == "agrees" and judged.raises_level
        data = client.get(reverse("run-detail", args=[run.pk])).json()
        assert data["reruns"][0]["class_words"] == "0.1–1 ms ops timed on two kinds of host"
        assert data["host_bound"] is False
        # The same rerun on the measurement's kind of host is judged in the GPU-timed class.
        rerun["environment"]["cpu_threads"] = 32
        alike = record(rerun_request(run=run), rerun)
        assert alike.sampling["verdict_model"]["verdict_class"] == "latency|0.1–1 ms|below the power cap"

    def test_the_api_filter_finds_host_bound_runs_only(self, client, h200_run):
        bound = measured_run(h200_run, sampling={"host_paced_samples": 30})
        rerun_on(bound, CARDS[1], 0.9)
        listed = client.get(reverse("run-list"), {"host_bound": "true"}).json()["results"]
        assert [r["id"] for r in listed] == [bound.pk]
        others = client.get(reverse("run-list"), {"host_bound": "false"}).json()["results"]
        assert bound.pk not in [r["id"] for r in others] and others

    def test_run_tables_label_the_host_bound_figure_only(self, client, h200_run):
        bound = measured_run(h200_run, sampling={"host_paced_samples": 30})
        rerun_on(bound, CARDS[1], 0.9)
        page = client.get(reverse("registry:run-list")).content.decode()
        assert page.count("includes the host's pace") == 1
        kernel = client.get(reverse("registry:kernel-detail", args=["geglu"])).content.decode()
        assert kernel.count("includes the host's pace") == 1


class TestRejudge:
    def test_judging_again_keeps_the_fixed_tolerance_verdict_as_history(self, h200_run):
        run = measured_run(h200_run)
        job = rerun_on(run, CARDS[1], 0.9)
        sampling = {k: v for k, v in job.sampling.items() if k != "verdict_model"}
        type(job).objects.filter(pk=job.pk).update(verdict="inconclusive", tolerance=0.02, sampling=sampling)
        assert rerun_rejudge(job_id=job.pk) == ("inconclusive", "agrees")
        job.refresh_from_db()
        assert job.sampling["earlier_judgements"][-1]["tolerance"] == 0.02
        assert job.samples == spread_samples(0.9)
        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.REPRODUCED


class TestPooledAndSpread:
    def test_three_cards_give_a_pooled_verdict_and_the_spread(self, client, h200_run):
        run = measured_run(h200_run)
        for card, median in zip(CARDS[1:4], (0.903, 0.897, 0.905), strict=True):
            rerun_on(run, card, median)
        data = client.get(reverse("run-detail", args=[run.pk])).json()
        assert data["card_spread"]["cards"] == 4
        assert data["card_spread"]["low"] < 0 < data["card_spread"]["high"]
        assert data["pooled"]["cards"] == 4 and data["pooled"]["verdict"] == "agrees"
        page = client.get(reverse("registry:run-detail", args=[run.pk])).content.decode()
        assert "4 physical cards measured this workload" in page


class TestFleet:
    def test_each_card_has_its_jobs_and_offsets_in_constant_queries(self, client, h200_run):
        run = measured_run(h200_run)
        for card in CARDS[1:3]:
            rerun_on(run, card, 0.9)
        with CaptureQueriesContext(connection) as few:
            assert client.get(reverse("fleet-api")).status_code == 200
        liger = BenchmarkRun.objects.filter(
            implementation__provider="liger", environment__slug="nvidia-h200"
        ).first()
        other = measured_run(liger, median=0.8, provider="liger")
        for card in CARDS[1:5]:
            rerun_on(other, card, 0.8 * (1.01 if card == CARDS[4] else 1.0))
        with CaptureQueriesContext(connection) as many:
            response = client.get(reverse("fleet-api"))
        assert len(many) == len(few)
        cards = {c["card"]: c for c in response.json()["cards"]}
        assert set(cards) == {card[:12] for card in CARDS}
        offset = cards[CARDS[4][:12]]["offsets"][0]
        assert offset["offset"] == pytest.approx(0.01, abs=1e-6) and offset["workloads"] == 1
        assert cards[CARDS[0][:12]]["measure_jobs"] == 2

        page = client.get(reverse("jobs:fleet"))
        assert page.status_code == 200 and CARDS[4][:12] in page.content.decode()
        detail = client.get(reverse("jobs:fleet-card", args=[CARDS[4][:12]]))
        assert detail.status_code == 200 and "0.1–1 ms ops below the power cap" in detail.content.decode()
        assert client.get("/fleet/GPU-00000000/").status_code == 404
        assert client.get("/fleet/not-a-card/").status_code == 404
