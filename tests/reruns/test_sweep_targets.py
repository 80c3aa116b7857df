"""What the sweep counts as measured: a run of a kernel whose script's own warm-up the harness now
runs (fused_moe's liger autotune at the model's base T) but whose measure job did not is history,
and its target is measured again. And `controlled_sweep --status`: where the sweep stands, read
from the registry without a GPU."""

import json
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Q
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.reruns.judgement import SETTLE_MAX
from registry.reruns.models import JobKind, RerunJob
from registry.reruns.sweep import loop
from registry.reruns.sweep.status import progress
from registry.reruns.sweep.targets import current_families, legacy_runs, measured_targets, targets
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def shipped_fused_moe(tmp_path):
    shutil.copy(BUNDLED_CONTROLLED_DIR / "nvidia-h200-fused_moe.json.gz", tmp_path)
    controlled_runs_load(path=tmp_path)
    return BenchmarkRun.objects.filter(
        kernel__slug="fused_moe", protocol__comparability_family__in=current_families("nvidia-h200")
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

    done = measured_targets(gpu_slug="nvidia-h200")

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
    assert not {run.pk for run in legacy_runs("nvidia-h200", ["fused_moe"])} & without


def test_a_liger_run_whose_measure_job_ran_upstreams_warmup_counts_as_measured(shipped_fused_moe):
    liger = shipped_fused_moe.filter(implementation__provider="liger")
    with_warmup, without = _by_warmup(liger)

    def target(run):
        return run.operation_mode, run.metric, run.workload_id

    def counted():
        return {run.pk for run in measured_targets(gpu_slug="nvidia-h200").values()}

    # A target measured both ways: first without the warm-up, again with it (the data grows, so
    # the test builds its case from whichever such pair the shipped file holds).
    earlier_of = {target(run): run for run in liger.filter(pk__in=without)}
    later = next(run for run in liger.filter(pk__in=with_warmup).order_by("pk") if target(run) in earlier_of)
    earlier = earlier_of[target(later)]
    assert later.pk in counted() and earlier.pk not in counted()
    # Without the later run's warm-up the target waits: neither run counts.
    _warmup_set(later, "")
    assert not {later.pk, earlier.pk} & counted()
    # The earlier run's job with it, the earlier run counts.
    _warmup_set(earlier, "_warmup_liger at T=8192, E=128")
    assert earlier.pk in counted()


def _warmup_set(run, warmup: str) -> None:
    job = RerunJob.objects.get(kind=JobKind.MEASURE, result_run=run)
    job.sampling = {**job.sampling, "upstream_warmup": warmup}
    job.save(update_fields=["sampling"])


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


@pytest.fixture
def fused_moe_source(tmp_path, db):
    """The bundled Liger data's fused_moe rows: the sweep's targets for that kernel."""
    lines = BUNDLED_LIGER_CSV.read_text().splitlines(keepends=True)
    path = tmp_path / "fused_moe.csv"
    path.write_text(lines[0] + "".join(line for line in lines[1:] if line.startswith("fused_moe,")))
    liger_import(path=path)


QUERIES = 10  # targets 3, measured 2, reruns done 1, rerun record 3, older protocol 1


def status() -> dict:
    return progress(gpu_slug="nvidia-h200", kernels=["fused_moe"])


def test_the_status_says_what_is_measured_which_reruns_are_owed_and_the_jobs_left(
    fused_moe_source, shipped_fused_moe, django_assert_max_num_queries
):
    # The shipped file measures every fused_moe target: take two runs out, so two are left to measure.
    for target_run in list(measured_targets(gpu_slug="nvidia-h200").values())[:2]:
        RerunJob.objects.filter(Q(run=target_run) | Q(result_run=target_run)).delete()
        target_run.delete()
    # A fixed number of queries, however many runs and jobs the registry holds.
    with django_assert_max_num_queries(QUERIES):
        before = status()
    owed = before["reruns_owed"]
    assert (
        0
        < before["measured"]
        < before["targets"]
        == len(targets(gpu_slug="nvidia-h200", kernels=["fused_moe"]))
    )
    assert before["to_measure"] == before["targets"] - before["measured"]
    assert before["kernels"] == {"fused_moe": {"targets": before["targets"], "measured": before["measured"]}}
    assert before["jobs_left"] == 2 * before["to_measure"] + sum(owed.values())

    # A measured run that agreed on another card: its rerun taken back, it is owed one again.
    counted = {run.pk for run in measured_targets(gpu_slug="nvidia-h200").values()}
    rerun = (
        RerunJob.objects.filter(kind=JobKind.RERUN, run__in=counted, verdict="agrees")
        .exclude(gpu_uuid="")
        .select_related("run")
        .first()
    )
    assert rerun is not None
    RerunJob.objects.filter(kind=JobKind.RERUN, run=rerun.run).update(verdict="", state="cancelled")
    after = status()
    assert after["reruns_owed"]["never_rerun"] == owed["never_rerun"] + 1
    assert after["jobs_left"] == before["jobs_left"] + 1

    # Judged again, but on the card that measured it: still owed, as a rerun on another card.
    measured_on = RerunJob.objects.get(kind=JobKind.MEASURE, result_run=rerun.run).gpu_uuid
    RerunJob.objects.filter(pk=rerun.pk).update(verdict="agrees", state="succeeded", gpu_uuid=measured_on)
    again = status()
    assert again["reruns_owed"]["never_rerun"] == owed["never_rerun"]
    assert (
        again["reruns_owed"]["rerun_only_on_the_measuring_card"]
        == owed["rerun_only_on_the_measuring_card"] + 1
    )
    assert again["jobs_left"] == before["jobs_left"] + 1

    # On another card: nothing is owed for it.
    RerunJob.objects.filter(pk=rerun.pk).update(gpu_uuid="GPU-another-card")
    assert status() == before

    # Unless that verdict was inconclusive: then another rerun may settle it.
    RerunJob.objects.filter(pk=rerun.pk).update(verdict="inconclusive")
    unsettled = status()
    assert (
        unsettled["reruns_owed"]["inconclusive_on_another_card"] == owed["inconclusive_on_another_card"] + 1
    )
    assert unsettled["jobs_left"] == before["jobs_left"] + 1

    # Until it has had the most such verdicts a sweep sends: then it is owed nothing, and counted.
    for card in range(1, SETTLE_MAX):
        job = RerunJob.objects.get(pk=rerun.pk)
        job.pk, job.gpu_uuid = None, f"GPU-card-{card}"
        job.save()
    settled = status()
    assert settled["reruns_owed"] == owed
    assert settled["inconclusive_after_the_most_reruns"] == before["inconclusive_after_the_most_reruns"] + 1
    assert settled["jobs_left"] == before["jobs_left"]
    assert (
        settled["reproduced"]
        == before["reproduced"]
        == sum(
            run.evidence_level == "reproduced" for run in measured_targets(gpu_slug="nvidia-h200").values()
        )
    )


def test_the_status_command_reads_the_registry_and_refuses_what_it_cannot_answer(
    fused_moe_source, shipped_fused_moe
):
    out = StringIO()
    call_command("controlled_sweep", "--status", "--gpu", "nvidia-h200", "--kernel", "fused_moe", stdout=out)
    assert json.loads(out.getvalue()) == status()
    with pytest.raises(CommandError, match="--status needs --gpu"):
        call_command("controlled_sweep", "--status", stdout=StringIO())
    with pytest.raises(CommandError, match="--kernel: no mapped kernel no_such_kernel"):
        call_command("controlled_sweep", "--status", "--gpu", "nvidia-h200", "--kernel", "no_such_kernel")


def test_a_skipped_kernel_leaves_the_sweep_and_its_status(fused_moe_source, shipped_fused_moe):
    """`--skip-kernel fused_moe`: a short sweep need not pay fused_moe's cold compile (GPU-e0878895's host
    measured the other kernels' 568 targets that way)."""

    def status_of(*flags):
        out = StringIO()
        call_command("controlled_sweep", "--status", "--gpu", "nvidia-h200", *flags, stdout=out)
        return json.loads(out.getvalue())

    whole = status_of()
    skipped = status_of("--skip-kernel", "fused_moe")

    assert whole["kernels"]["fused_moe"]["targets"] > 0
    assert "fused_moe" not in skipped["kernels"]
    assert skipped["targets"] == whole["targets"] - whole["kernels"]["fused_moe"]["targets"]
    with pytest.raises(CommandError, match="--skip-kernel: no mapped kernel no_such_kernel"):
        status_of("--skip-kernel", "no_such_kernel")
    with pytest.raises(CommandError, match="leaves no kernel to sweep"):
        status_of("--kernel", "fused_moe", "--skip-kernel", "fused_moe")


def test_the_status_of_an_empty_registry_says_what_to_load(db):
    with pytest.raises(CommandError, match="load_bundled_data"):
        call_command("controlled_sweep", "--status", "--gpu", "nvidia-h200")


def test_a_sweep_without_the_harness_refuses_before_it_sends_a_job(tmp_path, monkeypatch, fused_moe_source):
    """A host where `fetch_harness` has not run: every job would fail at once, each target twice
    (the first sweep on GPU-dc082f35, 2026-12-03, did that to 852 targets). The command says what to run."""
    monkeypatch.setenv("KERNELINDEX_HARNESS_DIR", str(tmp_path / "empty"))

    with pytest.raises(
        CommandError, match=r"harness is not in .*run `python manage.py fetch_harness`; no job was sent"
    ):
        call_command(
            "controlled_sweep", "--gpu", "nvidia-h200", "--out", str(tmp_path / "out"), stdout=StringIO()
        )

    assert not RerunJob.objects.exists()


def test_remeasure_plans_every_target_again_and_a_resumed_sweep_only_what_is_not_measured(
    fused_moe_source, shipped_fused_moe, tmp_path
):
    """`controlled_sweep --remeasure` (`resume=False`): the targets already measured are sent again
    (each new run supersedes its target's earlier one), for fresh measurements in blocks."""
    plan = dict(
        gpu_slug="nvidia-h200",
        gpus=1,
        out=tmp_path,
        kernels=["fused_moe"],
        limit=None,
        reruns=False,
        same_card=False,
        job_timeout_s=60,
    )
    measured = set(measured_targets(gpu_slug="nvidia-h200"))
    resumed = set(loop._plan(resume=True, figures=loop.Progress(), **plan).pending)
    again = set(loop._plan(resume=False, figures=loop.Progress(), **plan).pending)

    assert measured
    assert not measured & resumed
    assert measured <= again
    assert again == set(targets(gpu_slug="nvidia-h200", kernels=["fused_moe"]))
