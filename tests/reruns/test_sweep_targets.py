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


def test_liger_runs_measured_before_upstreams_warmup_are_measured_again(shipped_fused_moe):
    liger = shipped_fused_moe.filter(implementation__provider="liger")
    huggingface = shipped_fused_moe.filter(implementation__provider="huggingface")
    assert liger.exists() and huggingface.exists()

    done = sweep.measured_targets(gpu_slug="nvidia-h200")

    # Shipped before the harness ran `_warmup_liger`: only huggingface's runs count as measured.
    assert {target.provider for target in done} == {"huggingface"}
    assert {run.pk for run in done.values()} <= set(huggingface.values_list("pk", flat=True))
    # Neither are they rerun as runs of an older protocol: they stay as they are, with their verdicts.
    assert not set(run.pk for run in sweep._legacy_runs("nvidia-h200", ["fused_moe"])) & set(
        liger.values_list("pk", flat=True)
    )


def test_a_liger_run_whose_measure_job_ran_upstreams_warmup_counts_as_measured(shipped_fused_moe):
    job = RerunJob.objects.filter(
        kind=JobKind.MEASURE, result_run__in=shipped_fused_moe.filter(implementation__provider="liger")
    ).first()
    job.sampling = {**job.sampling, "upstream_warmup": "_warmup_liger at T=8192, E=128"}
    job.save(update_fields=["sampling"])

    done = sweep.measured_targets(gpu_slug="nvidia-h200")

    assert [run.pk for target, run in done.items() if target.provider == "liger"] == [job.result_run_id]


def test_the_run_page_and_api_say_whether_the_scripts_warmup_ran(client, settings, shipped_fused_moe):
    settings.PAGE_CACHE_SECONDS = 0
    liger = shipped_fused_moe.filter(implementation__provider="liger").order_by("pk")
    before, after = liger[0], liger[1]
    job = RerunJob.objects.get(kind=JobKind.MEASURE, result_run=after)
    job.sampling = {**job.sampling, "upstream_warmup": "_warmup_liger at T=8192, E=128"}
    job.save(update_fields=["sampling"])
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
