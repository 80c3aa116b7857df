"""A controlled run's page and API show its evidence: every sample, the precision reached and why
sampling stopped, the GPU's state (and whether it throttled), upstream's own figure, and each
rerun's verdict with its interval; the home page counts each kernel's runs per evidence level."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry import charts, selectors, views
from registry.models import BenchmarkRun, EvidenceLevel, Kernel
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.reruns.models import RerunJob
from registry.sampleplot import MAX_SAMPLE_MARKS
from tests.site.conftest import liger_rows

CARD_A, CARD_B = "GPU-aaaaaaaa-0000", "GPU-bbbbbbbb-1111"
STEADY = {
    "sm_clock_mhz": 1980,
    "memory_clock_mhz": 3201,
    "temperature_c": 38,
    "power_w": 119.7,
    "reasons": [],
}


@pytest.fixture(autouse=True)
def no_page_cache(settings):
    settings.PAGE_CACHE_SECONDS = 0


@pytest.fixture
def run(import_rows):
    import_rows(liger_rows(providers=("liger", "huggingface"), xs=(1024, 2048), modes=("backward",)))
    return BenchmarkRun.objects.order_by("pk").first()


def samples(count: int, centre: float = 10.0) -> list[float]:
    return [centre * (1 + ((i * 37) % 11 - 5) / 1000) for i in range(count)]


def job_for(target, **fields) -> RerunJob:
    defaults = {
        "kernel": target.kernel,
        "workload": target.workload,
        "provider": target.implementation.provider,
        "operation_mode": target.operation_mode,
        "metric": target.metric,
        "gpu_slug": target.environment.slug,
        "state": "succeeded",
        "unit": target.unit,
    }
    return RerunJob.objects.create(**{**defaults, **fields})


def measure(run, *, count=40, throttled=(), stop="precision", precision=0.0045, **extra) -> RerunJob:
    fields = {
        "kind": "measure",
        "result_run": run,
        "samples": samples(count),
        "median": 10.0,
        "ci_low": 9.98,
        "ci_high": 10.02,
        "gpu_uuid": CARD_A,
        "sampling": {"stop": stop, "precision": precision, "target_precision": 0.005, "confidence": 0.99},
        "gpu_state": {
            "before": STEADY,
            "after": {**STEADY, "reasons": list(throttled)},
            "throttled": list(throttled),
        },
        "upstream": {"median": 10.7, "p20": 10.6, "p80": 10.9},
    }
    return job_for(run, **{**fields, **extra})


def rerun(
    run, *, verdict="agrees", deviation=0.003, interval=(-0.004, 0.01), same_gpu=False, count=30, **extra
):
    fields = {
        "kind": "rerun",
        "run": run,
        "samples": samples(count),
        "median": 10.03,
        "ci_low": 10.0,
        "ci_high": 10.05,
        "verdict": verdict,
        "deviation": deviation,
        "deviation_low": interval[0],
        "deviation_high": interval[1],
        "tolerance": 0.02,
        "gpu_uuid": CARD_A if same_gpu else CARD_B,
        "verdict_note": "Compared: KernelIndex-protocol samples.",
        "sampling": {"basis": "samples", "same_gpu": same_gpu, "stop": "precision", "precision": 0.004},
    }
    return job_for(run, **{**fields, **extra})


def page(client, run) -> str:
    response = client.get(run.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


def evidence_section(html: str) -> str:
    return html.split('id="controlled-evidence"')[1].split('id="protocol"')[0]


@pytest.mark.django_db
class TestTheSamplePlot:
    def test_it_draws_one_mark_per_sample_of_the_measurement_and_of_each_rerun(self, client, run):
        measure(run, count=40)
        rerun(run, count=30)

        section = evidence_section(page(client, run))

        svg = re.search(r"<svg class=\"chart sample-plot\".*?</svg>", section, re.S).group(0)
        assert svg.count('class="sample"') == 70
        assert re.findall(r'data-samples="(\d+)"', svg) == ["40", "30"]
        assert "<title" in svg and "<desc" in svg  # its text alternative
        assert '<table class="sample-summary">' in section
        assert "<script" not in section

    def test_a_job_over_the_cap_is_drawn_as_a_histogram_and_says_so(self, client, run):
        measure(run, count=MAX_SAMPLE_MARKS + 100)

        section = evidence_section(page(client, run))

        assert 'class="sample"' not in section
        assert 'class="bin"' in section
        assert f'{MAX_SAMPLE_MARKS + 100} <span class="muted small">(drawn as a histogram)</span>' in section
        assert f"more than {MAX_SAMPLE_MARKS} samples is drawn as a histogram" in section

    def test_a_far_outlier_is_counted_on_the_edge_not_drawn_off_the_plot(self, client, run):
        job = measure(run, count=40)
        job.samples = [*job.samples, 500.0]
        job.save()

        section = evidence_section(page(client, run))

        assert 'class="beyond"' in section
        assert "1 sample beyond the drawn range, out to 500.0" in section


@pytest.mark.django_db
class TestPrecisionAndTheGpu:
    def test_the_page_shows_the_count_the_precision_against_the_target_and_the_stop(self, client, run):
        measure(run, count=40, precision=0.0045)

        section = evidence_section(page(client, run))

        assert "40 samples" in section
        assert "±0.45%" in section and "target of ±0.5%: reached" in section
        assert "<code>precision</code>: stopped on precision" in section
        assert "median 10.70 ms (p20 10.60, p80 10.90)" in section  # upstream's own figure

    def test_a_budget_stop_says_the_target_was_not_reached(self, client, run):
        measure(run, stop="budget", precision=0.012)

        section = evidence_section(page(client, run))

        assert "±1.20%" in section and "<strong>not reached</strong>" in section
        assert "stopped on the time budget" in section

    def test_a_throttled_run_says_so(self, client, run):
        measure(run, throttled=["sw_power_cap"])

        section = evidence_section(page(client, run))

        assert 'data-notice="throttled"' in section
        assert "This run throttled." in section and "sw_power_cap" in section
        assert "1980 MHz" in section and "38 °C" in section

    def test_a_run_that_did_not_throttle_shows_no_notice(self, client, run):
        measure(run, throttled=[])

        section = evidence_section(page(client, run))

        assert "throttled" not in section.replace("throttled: ", "")
        assert 'data-notice="throttled"' not in section

    def test_a_source_run_without_jobs_has_no_evidence_section(self, client, run):
        assert 'id="controlled-evidence"' not in page(client, run)


@pytest.mark.django_db
class TestVerdicts:
    def test_each_rerun_shows_its_verdict_interval_sides_and_gpu(self, client, run):
        measure(run, count=40)
        rerun(run, verdict="agrees", deviation=0.003, interval=(-0.004, 0.01), same_gpu=False, count=30)
        rerun(run, verdict="inconclusive", deviation=0.015, interval=(0.001, 0.029), same_gpu=True, count=25)

        section = evidence_section(page(client, run))

        assert "agrees: +0.30% (95% interval −0.40% to +1.00%), within ±2%" in section
        assert "inconclusive: +1.50% (95% interval +0.10% to +2.90%), neither wholly within" in section
        assert "Another rerun may settle it" in section
        assert "rerun 30 samples; recorded run 40 samples" in section
        assert "rerun 25 samples; recorded run 40 samples" in section
        assert '<strong data-field="gpu">another physical GPU</strong>' in section
        assert '<strong data-field="gpu">the same physical GPU</strong>' in section
        assert "Compared: KernelIndex-protocol samples." in section

    def test_an_agreeing_rerun_on_the_measuring_card_says_it_does_not_make_the_run_reproduced(
        self, client, run
    ):
        measure(run, count=40)
        rerun(run, verdict="agrees", same_gpu=True)
        rerun(run, verdict="agrees", same_gpu=False)

        section = evidence_section(page(client, run))

        assert section.count('data-notice="same-card"') == 1
        assert "that takes a rerun on another card" in section

    def test_a_run_no_other_card_could_settle_says_so_and_whether_a_sweep_tries_again(self, client, run):
        from registry.reruns.judgement import SETTLE_MAX

        measure(run, count=40)
        rerun(run, verdict="agrees", same_gpu=True)  # the measuring card's verdict does not count
        for deviation in (0.019, -0.021):
            rerun(
                run,
                verdict="inconclusive",
                deviation=deviation,
                interval=(deviation - 0.01, deviation + 0.01),
            )

        section = evidence_section(page(client, run))

        assert section.count('data-notice="unsettled"') == 1
        assert "All 2 of its reruns on other cards are <em>inconclusive</em>" in section
        assert "(difference of medians −2.10%, +1.90%; tolerance ±2%)" in section
        assert f"A later sweep reruns it on another card, up to {SETTLE_MAX} such reruns." in section
        api = client.get(reverse("run-detail", args=[run.pk])).json()
        assert api["unsettled"] == {"reruns": 2, "sweep_reruns_again": True}

        for _ in range(SETTLE_MAX - 2):
            rerun(run, verdict="inconclusive", deviation=0.018, interval=(0.01, 0.026))
        section = evidence_section(page(client, run))

        assert f"All {SETTLE_MAX} of its reruns on other cards" in section
        assert f"no more than {SETTLE_MAX} such reruns, so the run stays <em>measured</em>" in section
        assert "A later sweep reruns it" not in section
        api = client.get(reverse("run-detail", args=[run.pk])).json()
        assert api["unsettled"] == {"reruns": SETTLE_MAX, "sweep_reruns_again": False}

    def test_a_run_another_card_settled_has_no_unsettled_notice(self, client, run):
        measure(run, count=40)
        rerun(run, verdict="inconclusive", deviation=0.019, interval=(0.009, 0.029))
        rerun(run, verdict="disagrees", deviation=0.05, interval=(0.04, 0.06))

        assert 'data-notice="unsettled"' not in evidence_section(page(client, run))
        assert client.get(reverse("run-detail", args=[run.pk])).json()["unsettled"] is None

    def test_the_job_page_reads_the_verdict_not_the_state(self, client, run):
        measure(run, count=40)
        said = {}
        for verdict, same_gpu in (("agrees", False), ("agrees", True), ("inconclusive", False)):
            job = rerun(run, verdict=verdict, same_gpu=same_gpu)
            html = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
            said[(verdict, same_gpu)] = " ".join(re.sub(r"<[^>]+>", " ", html).split())

        assert "agrees , so the run is reproduced" in said[("agrees", False)]
        assert "reproduced takes a rerun on another card" in said[("agrees", True)]
        assert "inconclusive ; the run's evidence level is unchanged" in said[("inconclusive", False)]
        assert "so the run is reproduced" not in said[("inconclusive", False)]

    def test_a_memory_job_counts_upstreams_peaks_and_says_what_else_it_read(self, client, run):
        peaks = [2040.0] * 10
        compiled = [900.0, 960.0, 1500.0]  # read inside the first pass, before upstream's first
        figures = {"median": 2040.0, "p20": 2040.0, "p80": 2040.0}
        measure(run, metric="memory", samples=compiled + peaks, upstream=figures, median=2040.0)

        section = evidence_section(page(client, run))

        assert '<strong data-figure="sample-count">10 samples</strong>' in section
        assert "3 more allocator readings were taken inside a pass" in section
        assert section.count('data-notice="inside-pass"') == 1
        api = client.get(reverse("run-detail", args=[run.pk])).json()["measurement"]
        assert (api["sample_count"], api["readings_inside_passes"]) == (10, 3)

    def test_a_memory_job_whose_readings_are_all_upstreams_has_no_such_notice(self, client, run):
        figures = {"median": 2040.0, "p20": 2040.0, "p80": 2040.0}
        measure(run, metric="memory", samples=[2040.0] * 10, upstream=figures, median=2040.0)

        assert 'data-notice="inside-pass"' not in evidence_section(page(client, run))

    def test_samples_that_move_together_say_the_precision_overstates_the_job(self, client, run):
        descending = [10.3 - 0.6 * i / 59 for i in range(60)]  # a job whose calls slow down: r = 1
        measure(run, samples=descending)
        rerun(run)  # samples() alternate around their centre: r < 0

        section = evidence_section(page(client, run))
        data = client.get(reverse("run-detail", args=[run.pk])).json()

        assert section.count('data-notice="serial"') == 1
        assert "lag-1 autocorrelation</a> 1.00" in section
        assert data["measurement"]["serial_correlation"] == pytest.approx(1.0)
        assert data["reruns"][0]["serial_correlation"] < 0.3

    def test_calls_the_host_queued_slower_than_their_spin_say_the_figure_includes_the_hosts_pace(
        self, client, run
    ):
        paced = {"spin_ms": 20.1, "host_queue_ms": 412.5, "host_paced_samples": 12}
        measure(run, sampling={"stop": "budget", "precision": 0.03, **paced})
        rerun(run, sampling={"basis": "samples", "same_gpu": False, **paced, "host_paced_samples": 30})

        section = evidence_section(page(client, run))
        data = client.get(reverse("run-detail", args=[run.pk])).json()

        # 12 of 40: the median rests on calls the host kept ahead of; 30 of 30: it is host-paced.
        assert 'data-notice="some-host-paced"' in section and 'data-notice="host-paced"' not in section
        assert "12 of 40 calls took longer to queue than their spin lasted</span>, fewer than half" in section
        assert "median 412.500 ms to queue one call; the spin ahead of each call lasted 20.100 ms" in section
        assert 'data-notice="rerun-host-paced"' in section and "30 of its 30 calls" in section
        assert 'data-notice="rerun-some-host-paced"' not in section
        assert (data["measurement"]["host_paced_samples"], data["measurement"]["spin_ms"]) == (12, 20.1)
        assert data["measurement"]["spin_capped"] is False
        assert (data["measurement"]["median_host_paced"], data["reruns"][0]["median_host_paced"]) == (
            False,
            True,
        )

    def test_half_the_calls_host_paced_say_the_median_includes_the_hosts_pace(self, client, run):
        measure(
            run, sampling={"stop": "budget", "spin_ms": 20.0, "host_queue_ms": 30.0, "host_paced_samples": 20}
        )
        rerun(run, sampling={"basis": "samples", "same_gpu": False, "host_paced_samples": 1})

        section = evidence_section(page(client, run))
        data = client.get(reverse("run-detail", args=[run.pk])).json()

        assert 'data-notice="host-paced"' in section and "20 of 40 calls" in section
        assert "so this figure, their median, includes the host's pace" in section
        assert (
            'data-notice="rerun-some-host-paced"' in section
            and 'data-notice="rerun-host-paced"' not in section
        )
        assert (data["measurement"]["median_host_paced"], data["reruns"][0]["median_host_paced"]) == (
            True,
            False,
        )

    def test_a_job_whose_calls_all_queued_within_their_spin_says_the_gpus_work_was_timed(self, client, run):
        measure(
            run,
            sampling={"stop": "precision", "spin_ms": 0.1, "host_queue_ms": 0.02, "host_paced_samples": 0},
        )

        section = evidence_section(page(client, run))

        assert 'data-field="host-pace"' in section and 'data-notice="host-paced"' not in section
        assert "the events timed the GPU's work" in section

    def test_a_job_recorded_before_host_pace_with_a_capped_spin_says_it_may_include_it(self, client, run):
        measure(run, sampling={"stop": "budget", "lead_cycles": 40_000_000})
        rerun(run, sampling={"basis": "samples", "same_gpu": False, "lead_cycles": 400_000})

        section = evidence_section(page(client, run))
        data = client.get(reverse("run-detail", args=[run.pk])).json()

        assert 'data-notice="spin-capped"' in section
        assert "at least 10 ms to queue one call" in section and "its cap of 20 ms" in section
        assert 'data-notice="rerun-spin-capped"' not in section  # its spin was 0.2 ms, under the cap
        assert (
            data["measurement"]["spin_capped"] is True and data["measurement"]["host_paced_samples"] is None
        )
        assert data["reruns"][0]["spin_capped"] is False

    def test_a_job_without_either_record_shows_no_host_pace(self, client, run):
        measure(run)

        assert 'data-field="host-pace"' not in evidence_section(page(client, run))

    def test_a_rerun_of_a_source_run_is_judged_against_its_published_figure(self, client, run):
        rerun(
            run,
            verdict="disagrees",
            deviation=-0.08,
            interval=(-0.1, -0.05),
            same_gpu=None,
            sampling={"basis": "upstream", "same_gpu": None},
            upstream={"median": 9.2, "p20": 9.2, "p80": 9.2},
        )

        section = evidence_section(page(client, run))

        assert "disagrees: −8.00% (95% interval −10.00% to −5.00%), outside ±2%" in section
        assert "rerun upstream&#x27;s do_bench figure, one timed call" in section
        assert "recorded run the recorded median, its published p20–p80 range" in section
        assert "not recorded" in section  # whether it ran on the same card
        # The source run's samples are drawn against its recorded median.
        assert 'class="reference"' in section


@pytest.mark.django_db
class TestTheApi:
    def test_the_run_endpoint_gives_the_measurement_and_each_verdict(self, client, run):
        measure(run, count=40, throttled=["hw_slowdown"])
        job = rerun(run, count=30)

        data = client.get(reverse("run-detail", args=[run.pk])).json()

        assert data["measurement"]["sample_count"] == 40
        assert data["measurement"]["precision"] == 0.0045
        assert data["measurement"]["stop"] == "precision"
        assert data["measurement"]["throttled"] == ["hw_slowdown"]
        (verdict,) = data["reruns"]
        assert verdict["job"] == job.pk
        assert (verdict["verdict"], verdict["deviation"]) == ("agrees", 0.003)
        assert (verdict["deviation_low"], verdict["deviation_high"]) == (-0.004, 0.01)
        assert (verdict["sample_count"], verdict["recorded_sample_count"]) == (30, 40)
        assert verdict["same_gpu"] is False

    def test_the_run_list_gives_them_too_in_a_fixed_number_of_queries(
        self, client, run, django_assert_num_queries
    ):
        url = reverse("run-list")
        client.get(url)
        with CaptureQueriesContext(connection) as before:
            client.get(url)
        for other in BenchmarkRun.objects.all():
            measure(other)
            rerun(other)
        with django_assert_num_queries(len(before)):
            data = client.get(url).json()
        assert all(r["measurement"]["sample_count"] == 40 for r in data["results"])

    def test_the_job_endpoint_gives_the_verdict_fields(self, client, run):
        job = rerun(run, count=30)

        data = client.get(reverse("job-detail", args=[job.pk])).json()

        assert data["verdict"] == "agrees"
        assert (data["deviation"], data["deviation_low"], data["deviation_high"]) == (0.003, -0.004, 0.01)
        assert data["sample_count"] == 30
        assert data["same_gpu"] is False
        assert data["precision"] == 0.004
        assert data["stop"] == "precision"
        assert data["throttled"] == []
        listed = client.get(reverse("job-list")).json()["results"][0]
        assert listed["sample_count"] == 30 and listed["verdict"] == "agrees"


@pytest.mark.django_db
class TestHomeCoverage:
    def test_each_kernel_row_counts_its_runs_per_level_as_the_database_does(self, client, import_rows):
        import_rows(
            liger_rows(kernels=("geglu", "swiglu"), xs=(1024, 2048, 4096), modes=("forward", "backward"))
        )
        runs = BenchmarkRun.objects.order_by("pk")
        BenchmarkRun.objects.filter(
            pk__in=list(runs.filter(kernel__slug="geglu").values_list("pk", flat=True)[:3])
        ).update(evidence_level=EvidenceLevel.MEASURED)
        BenchmarkRun.objects.filter(
            pk__in=list(runs.filter(kernel__slug="swiglu").values_list("pk", flat=True)[:2])
        ).update(evidence_level=EvidenceLevel.REPRODUCED)

        html = client.get(reverse("registry:home")).content.decode()

        for kernel in Kernel.objects.all():
            row = html.split(f'data-kernel="{kernel.slug}"')[1].split("</tr>")[0]
            for level in EvidenceLevel.values:
                expected = sum(
                    1 for r in BenchmarkRun.objects.filter(kernel=kernel) if r.evidence_level == level
                )
                cell = re.search(rf'data-level="{level}">(.*?)</td>', row).group(1)
                assert re.sub(r"<[^>]+>", "", cell) == str(expected), (kernel.slug, level)
                if expected:
                    assert f"?evidence_level={level}" in cell

    def test_the_home_page_lists_the_kernels_with_the_most_runs_and_links_to_all(
        self, client, import_rows, monkeypatch
    ):
        import_rows(liger_rows(kernels=("geglu", "swiglu"), xs=(1024, 2048, 4096), modes=("forward",)))
        import_rows(liger_rows(kernels=("rms_norm",), xs=(1024,), modes=("forward",)))
        monkeypatch.setattr(views, "HOME_KERNELS", 2)

        html = client.get(reverse("registry:home")).content.decode()

        listed = re.findall(r'<tr data-kernel="([^"]+)"', html)
        assert sorted(listed) == ["geglu", "swiglu"]
        assert f'href="{reverse("registry:kernel-list")}">all 3 kernels</a>' in html
        everything = client.get(reverse("registry:kernel-list")).content.decode()
        assert sorted(re.findall(r"<td><code>([^<]+)</code></td>", everything)) == [
            "geglu",
            "rms_norm",
            "swiglu",
        ]


@pytest.mark.django_db
class TestQueryCounts:
    def test_the_run_page_takes_the_same_queries_with_many_samples_and_reruns(
        self, client, run, django_assert_num_queries
    ):
        measure(run, count=10)
        client.get(run.get_absolute_url())
        with CaptureQueriesContext(connection) as few:
            page(client, run)

        RerunJob.objects.filter(result_run=run).update(samples=samples(3000))
        for _ in range(6):
            rerun(run, count=400)
        with django_assert_num_queries(len(few)):
            html = page(client, run)
        assert html.count("Rerun #") == 6


HOSTILE = "<script>alert(1)</script>"


@pytest.mark.django_db
class TestHostileJson:
    def test_strings_and_html_in_the_jobs_json_render_escaped_and_never_fail(self, client, run):
        measure(
            run,
            samples=["<b>x</b>", 10.0, None, True, 10.1, "1e309", {"a": 1}],
            sampling={"precision": HOSTILE, "target_precision": "0.5%", "stop": HOSTILE, "same_gpu": "yes"},
            gpu_state={
                "before": {"sm_clock_mhz": HOSTILE, "power_w": [1], "reasons": HOSTILE},
                "after": ["not", "a", "mapping"],
                "throttled": [HOSTILE, {"nested": 1}],
            },
            upstream={"median": HOSTILE, "p20": None},
            verdict_note=HOSTILE,
        )
        job = rerun(run, sampling=["a list"], gpu_state=HOSTILE, upstream=[HOSTILE], verdict_note=HOSTILE)

        html = page(client, run)

        assert HOSTILE not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the throttle reason and the note, escaped
        section = evidence_section(html)
        assert section.count('class="sample"') == 2 + 30  # the two finite numbers, and the rerun's
        assert client.get(reverse("run-detail", args=[run.pk])).status_code == 200
        assert client.get(reverse("job-detail", args=[job.pk])).status_code == 200
        assert client.get(reverse("job-list")).status_code == 200


@pytest.mark.django_db
class TestShippedControlledRuns:
    @pytest.fixture
    def geglu(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
        return BenchmarkRun.objects.filter(source__slug="kernelindex-controlled")

    def test_they_load_with_their_providers_and_their_pages_answer(self, client, geglu):
        assert not geglu.filter(implementation__provider="").exists()
        assert not RerunJob.objects.filter(provider="").exists()
        for run in geglu.order_by("pk")[:5]:
            assert 'id="controlled-evidence"' in page(client, run)

    def test_the_kernel_pages_h200_charts_draw_every_controlled_workload(self, client, geglu):
        """One point per implementation, workload and family: a workload measured twice (both
        runs current, in one comparison group) draws its newest run, as the charts always have."""
        html = client.get(
            reverse("registry:kernel-detail", args=["geglu"]) + "?gpu=nvidia-h200"
        ).content.decode()

        # Each drawn point's run is linked from its panel's data table (the chart holds no link).
        tables = "".join(re.findall(r"<details><summary>Data table</summary>.*?</details>", html, re.S))
        drawn = {int(pk) for pk in re.findall(r'<a href="/runs/(\d+)/">', tables)}
        newest = {}
        for pk, key, provider in geglu.current().values_list(
            "pk", "comparison_key", "implementation__provider"
        ):
            newest[(key, provider)] = max(pk, newest.get((key, provider), 0))
        assert len(newest) > 60
        assert set(newest.values()) <= drawn

    def test_runs_of_two_families_at_one_point_get_a_line_each(self, geglu):
        kernel = Kernel.objects.get(slug="geglu")
        points = selectors.chart_points(BenchmarkRun.objects.filter(kernel=kernel).current())
        panels, _ = charts.panels_build(points)

        labels = {s.label for p in panels for s in p.series}
        assert any("kernelindex/cuda-v1" in label for label in labels)
        assert any("kernelindex/liger-do-bench-cuda-events" in label for label in labels)
