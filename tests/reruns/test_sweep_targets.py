"""What the sweep counts as measured: a run of a kernel whose script's own warm-up the harness now
runs (fused_moe's liger autotune at the model's base T) but whose measure job did not is history,
and its target is measured again."""

import shutil

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun, JobKind, RerunJob
from registry.reruns import sweep
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def shipped_fused_moe(tmp_path):
    shutil.copy(BUNDLED_CONTROLLED_DIR / "nvidia-h200-fused_moe.json.gz", tmp_path)
    controlled_runs_load(path=tmp_path)
    return BenchmarkRun.objects.filter(
        kernel__slug="fused_moe", protocol__comparability_family__in=sweep._current_families("nvidia-h200")
    )


def _by_warmup(runs) -> tuple[set[int], set[int]]:
    """Run ids of `runs` whose measure job ran upstream's warm-up, and of those whose job did not."""
    ran, missed = set(), set()
    for run_id, sampling in RerunJob.objects.filter(kind=JobKind.MEASURE, result_run__in=runs).values_list(
        "result_run_id", "sampling"
    ):
        (ran if sampling.get("upstream_warmup") else missed).add(run_id)
    return ran, missed


def test_liger_runs_measured_before_upstreams_warmup_are_measured_again(shipped_fused_moe):
    liger = shipped_fused_moe.filter(implementation__provider="liger")
    huggingface = shipped_fused_moe.filter(implementation__provider="huggingface")
    with_warmup, without = _by_warmup(liger)
    # The shipped file holds both: liger runs measured before the harness ran `_warmup_liger`
    # (2026-12-01 and early on 2026-12-02) and after.
    assert without and with_warmup and huggingface.exists()

    done = sweep.measured_targets(gpu_slug="nvidia-h200")

    counted = {run.pk for target, run in done.items() if target.provider == "liger"}
    assert counted and counted <= with_warmup
    assert not counted & without
    # Every liger target is one that a run with the warm-up measured.
    assert {t for t in done if t.provider == "liger"} == {
        t for t, run in done.items() if run.pk in with_warmup
    }
    assert {run.pk for target, run in done.items() if target.provider == "huggingface"} <= set(
        huggingface.values_list("pk", flat=True)
    )
    # Neither are they rerun as runs of an older protocol: they stay as they are, with their verdicts.
    assert not {run.pk for run in sweep._legacy_runs("nvidia-h200", ["fused_moe"])} & without


def test_a_liger_run_whose_measure_job_ran_upstreams_warmup_counts_as_measured(shipped_fused_moe):
    liger = shipped_fused_moe.filter(implementation__provider="liger")
    with_warmup, without = _by_warmup(liger)
    counted_before = {run.pk for target, run in sweep.measured_targets(gpu_slug="nvidia-h200").items()}
    # A run measured without the warm-up whose target no later run measured with it.
    measured_again = {
        (run.operation_mode, run.metric, run.workload_id) for run in liger.filter(pk__in=with_warmup)
    }
    waiting = [
        run
        for run in liger.filter(pk__in=without).order_by("pk")
        if (run.operation_mode, run.metric, run.workload_id) not in measured_again
    ]
    assert waiting, "no shipped liger fused_moe target is still waiting for a measurement with the warm-up"
    assert waiting[0].pk not in counted_before
    job = RerunJob.objects.get(kind=JobKind.MEASURE, result_run=waiting[0])
    job.sampling = {**job.sampling, "upstream_warmup": "_warmup_liger at T=8192, E=128"}
    job.save(update_fields=["sampling"])

    done = sweep.measured_targets(gpu_slug="nvidia-h200")

    assert waiting[0].pk in {run.pk for run in done.values()}


def test_the_run_page_and_api_say_whether_the_scripts_warmup_ran(client, settings, shipped_fused_moe):
    settings.PAGE_CACHE_SECONDS = 0
    liger = shipped_fused_moe.filter(implementation__provider="liger")
    with_warmup, without = _by_warmup(liger)
    before, after = liger.get(pk=min(without)), liger.get(pk=min(with_warmup))
    assert RerunJob.objects.get(kind=JobKind.MEASURE, result_run=after).sampling["upstream_warmup"] == (
        "_warmup_liger at T=8192, E=128"
    )
    huggingface = shipped_fused_moe.filter(implementation__provider="huggingface").first()

    def said(run):
        html = client.get(run.get_absolute_url()).content.decode()
        api = client.get(reverse("run-detail", args=[run.pk])).json()["measurement"]
        return html, (api["upstream_warmup"], api["missed_upstream_warmup"])

    html, api = said(before)
    assert 'data-notice="missed-upstream-warmup"' in html and api == ("", True)
    html, api = said(after)
    assert (
        "the script's own warm-up, as upstream does before its sweep: _warmup_liger at T=8192, E=128" in html
    )
    assert 'data-notice="missed-upstream-warmup"' not in html
    assert api == ("_warmup_liger at T=8192, E=128", False)
    html, api = said(huggingface)
    assert "upstream-warmup" not in html and api == ("", False)
