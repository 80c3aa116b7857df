"""What the sweep counts as measured: a run of a kernel whose script's own warm-up the harness now
runs (fused_moe's liger autotune at the model's base T) but whose measure job did not is history,
and its target is measured again."""

import shutil

import pytest

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
