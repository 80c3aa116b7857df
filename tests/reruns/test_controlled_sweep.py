"""The controlled sweep through the real pipeline on the CPU (`manage.py controlled_sweep --gpu
cpu`): its own fleet of Celery worker processes measures each target, reruns each result, the
recorder gives every rerun a verdict, and the export is data that loads again. Cut short, it goes
on where it stopped: a second sweep over a longer list measures only what the first left; on a
host with other cards, a run so far rerun only on the card that measured it is rerun there; on a
host whose only card measured a run, the run waits for another card."""

from collections import defaultdict

import pytest

from registry.models import BenchmarkRun
from registry.reruns import controlled, judgement
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.sweep import loop, targets
from registry.reruns.sweep.timeouts import timeouts_read
from tests.faults.support import small_cpu_rows
from tests.reruns.conftest import csv_import
from tests.reruns.worker import WORKER_ENV, broker_clear, broker_is_filesystem, broker_is_redis, database_url

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (broker_is_redis() or broker_is_filesystem()),
        reason="the sweep's worker processes need a broker they can share: Redis or the filesystem",
    ),
]
DEADLINE_S = 240  # a worker's first torch import can take 20 s on a busy machine; a job ~1 s


@pytest.fixture
def fleet_env(monkeypatch):
    """The sweep starts its workers from this process's environment: point them at the test
    database, with the pipeline tests' short timings and generous tolerance (tests/reruns/worker.py)."""
    broker_clear()
    monkeypatch.setenv("DATABASE_URL", database_url())
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    monkeypatch.setenv("DEBUG", "1")
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    yield
    broker_clear()


def controlled_runs():
    return BenchmarkRun.objects.filter(source__slug=controlled.CONTROLLED_SOURCE["slug"])


def test_a_sweep_measures_reruns_judges_and_exports_then_resumes_where_it_stopped(
    fleet_env, tmp_path, monkeypatch
):
    csv_import(tmp_path / "cpu.csv", small_cpu_rows(3))
    out = tmp_path / "controlled"
    out.mkdir()

    # A checkpoint after every job that finishes: what each wrote is read back as it is written,
    # as the next sweep would find it had this one been killed there.
    checkpoints = []

    def log(message):
        print(message)
        if message.startswith("checkpoint: "):
            (written,) = out.glob("cpu-*.json.gz")
            checkpoints.append(len(controlled.controlled_document_read(written)["runs"]))

    first = loop.sweep(
        gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=2, checkpoint_s=0, log=log
    )

    assert (first["measured"], first["reruns"], first["failed"], first["left"]) == (2, 2, [], 0), first
    # Each finished job was written before the sweep ended: both runs were on disk before the
    # last rerun finished, and no partial file is left beside them.
    assert checkpoints[0] >= 1 and checkpoints[-1] == 2 and len(checkpoints) >= 2, checkpoints
    assert sorted(path.name for path in out.iterdir() if path.is_file()) == [
        path.name for path in out.glob("cpu-*.json.gz")
    ]
    assert controlled_runs().count() == 2
    reruns = RerunJob.objects.filter(kind=JobKind.RERUN, run__in=controlled_runs())
    assert reruns.count() == 2
    assert all(job.verdict in {"agrees", "disagrees", "inconclusive"} for job in reruns), [
        (job.state, job.verdict, job.error) for job in reruns
    ]
    (exported,) = out.glob("cpu-*.json.gz")
    entries = controlled.controlled_document_read(exported)["runs"]
    assert len(entries) == 2
    for entry in entries:
        measure = next(job for job in entry["jobs"] if job["kind"] == "measure")
        assert len(measure["samples"]) >= 30 and measure["sampling"]["stop"] in {"precision", "budget"}
        assert any(job["kind"] == "rerun" and job["verdict"] for job in entry["jobs"])

    # The same folder, one more target: the two already measured are neither measured nor
    # rerun again.
    second = loop.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=3, log=print)

    assert (second["measured"], second["reruns"], second["left"]) == (1, 1, 0), second
    assert controlled_runs().count() == 3
    assert RerunJob.objects.filter(kind=JobKind.MEASURE).count() == 3
    assert len(controlled.controlled_document_read(exported)["runs"]) == 3

    # A later sweep on another host. A CPU has no card UUID, so the cards are named here: the
    # first two runs were measured and rerun on card A (a one-GPU host), and this host has card B.
    first_two = list(controlled_runs().order_by("pk")[:2])
    RerunJob.objects.filter(result_run__in=first_two).update(gpu_uuid="GPU-card-A")
    RerunJob.objects.filter(run__in=first_two).update(gpu_uuid="GPU-card-A")
    monkeypatch.setattr(loop, "local_gpus", lambda: (("cpu", "GPU-card-B"),))

    third = loop.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=3, log=print)

    # Only those two are rerun (the third run's card is unknown), each once more, with a verdict.
    assert (third["measured"], third["reruns"], third["left"]) == (0, 2, 0), third
    for run in first_two:
        reruns = RerunJob.objects.filter(kind=JobKind.RERUN, run=run).order_by("pk")
        assert reruns.count() == 2
        assert reruns.last().verdict in {"agrees", "disagrees", "inconclusive"}, reruns.last().error
    # Once a rerun of each has run on card B, nothing is left to check on another card.
    RerunJob.objects.filter(run__in=first_two, gpu_uuid="").update(gpu_uuid="GPU-card-B")
    assert same_card_runs(first_two, {"GPU-card-C"}) == []
    # And a host holding card A itself cannot give them a second card.
    RerunJob.objects.filter(run=first_two[0], gpu_uuid="GPU-card-B").update(gpu_uuid="GPU-card-A")
    assert same_card_runs(first_two, {"GPU-card-A"}) == []
    assert same_card_runs(first_two, {"GPU-card-C"}) == [first_two[0]]

    # A host whose only card is A: a rerun there could not make a run measured on A reproduced,
    # so such a run waits for another card, whether found at the start or measured by this sweep.
    third_run = controlled_runs().order_by("pk")[2]
    waiting = loop.Progress()
    assert loop._rerun_here([*first_two, third_run], {"GPU-card-A"}, waiting) == [third_run]
    assert waiting.waiting == 2
    assert loop._rerun_here(first_two, set(), waiting) == first_two  # several cards, or a CPU
    measured_on_a = RerunJob.objects.get(kind=JobKind.MEASURE, result_run=first_two[0])
    for host_card, reruns_here in (("GPU-card-A", []), ("GPU-card-C", [first_two[0]])):
        to_rerun, figures = [], loop.Progress()
        loop._collect({measured_on_a.pk: "target"}, [], to_rerun, {}, figures, True, {host_card})
        assert (figures.measured, figures.waiting, to_rerun) == (1, 1 - len(reruns_here), reruns_here)

    # A rerun that failed (a compiler's error on a cold cache, say) is sent again once, then
    # reported; one cancelled at the deadline is neither counted nor sent again.
    rerun = RerunJob.objects.filter(kind=JobKind.RERUN, run=first_two[0]).latest("pk")
    rerun.state, rerun.error = JobState.FAILED, "Harness failed: InternalTorchDynamoError"
    rerun.save(update_fields=["state", "error"])
    to_rerun, figures, attempts = [], loop.Progress(), defaultdict(int)
    loop._collect({rerun.pk: None}, [], to_rerun, attempts, figures, True)
    assert (to_rerun, figures.reruns, figures.failed) == ([first_two[0]], 0, [])
    loop._collect({rerun.pk: None}, [], to_rerun, attempts, figures, True)
    assert to_rerun == [first_two[0]] and figures.failed == [
        f"rerun of run {first_two[0].pk}: Harness failed: InternalTorchDynamoError"
    ]
    rerun.state = JobState.CANCELLED
    rerun.save(update_fields=["state"])
    to_rerun, figures = [], loop.Progress()
    loop._collect({rerun.pk: None}, [], to_rerun, defaultdict(int), figures, True)
    assert (to_rerun, figures.reruns, figures.failed) == ([], 0, [])

    # Each run measured on A, rerun on A, then on B: inconclusive there. Another rerun may settle
    # them: a host with card C reruns them once more, when nothing else is left; a host holding
    # A, the measuring card, cannot.
    for run in first_two:
        jobs = RerunJob.objects.filter(kind=JobKind.RERUN, run=run)
        jobs.update(state=JobState.SUCCEEDED, gpu_uuid="GPU-card-A", verdict="agrees")
        jobs.filter(pk=jobs.latest("pk").pk).update(gpu_uuid="GPU-card-B", verdict="inconclusive")
    assert unsettled(first_two, {"GPU-card-C"}) == first_two
    assert unsettled(first_two, {"GPU-card-A"}) == []
    assert same_card_runs(first_two, {"GPU-card-C"}) == []
    # A verdict on another card that is not inconclusive settles a run, either way.
    latest = RerunJob.objects.filter(kind=JobKind.RERUN, run=first_two[0]).latest("pk")
    for verdict in ("agrees", "disagrees"):
        RerunJob.objects.filter(pk=latest.pk).update(verdict=verdict)
        assert unsettled(first_two, {"GPU-card-C"}) == [first_two[1]]
    # So does a rerun under way, and SETTLE_MAX inconclusive verdicts: then it stays as it is.
    RerunJob.objects.filter(pk=latest.pk).update(verdict="inconclusive", state=JobState.QUEUED)
    assert unsettled(first_two, {"GPU-card-C"}) == [first_two[1]]
    RerunJob.objects.filter(pk=latest.pk).update(state=JobState.SUCCEEDED)
    extra = RerunJob.objects.filter(kind=JobKind.RERUN, run=first_two[0]).count()
    RerunJob.objects.filter(kind=JobKind.RERUN, run=first_two[0]).update(
        gpu_uuid="GPU-card-B", verdict="inconclusive"
    )
    assert extra < judgement.SETTLE_MAX and unsettled(first_two, {"GPU-card-C"}) == first_two
    settle_max = judgement.SETTLE_MAX
    monkeypatch.setattr(judgement, "SETTLE_MAX", extra)
    assert unsettled(first_two, {"GPU-card-C"}) == [first_two[1]]
    monkeypatch.setattr(judgement, "SETTLE_MAX", settle_max)
    monkeypatch.setattr(loop, "local_gpus", lambda: (("cpu", "GPU-card-C"),))

    fourth = loop.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=3, log=print)

    assert (fourth["measured"], fourth["reruns"], fourth["left"]) == (0, 2, 0), fourth
    for run in first_two:
        latest = RerunJob.objects.filter(kind=JobKind.RERUN, run=run).latest("pk")
        assert latest.verdict in {"agrees", "disagrees", "inconclusive"}, latest.error


def same_card_runs(runs, host_cards):
    return targets.same_card_runs(runs, targets.RerunRecord.read(runs), elsewhere_than=host_cards)


def unsettled(runs, host_cards):
    return targets.unsettled(runs, targets.RerunRecord.read(runs), elsewhere_than=host_cards)


def test_a_job_past_the_sweeps_time_limit_is_killed_reported_and_not_tried_again(fleet_env, tmp_path):
    """The sweep gives its workers a time limit of its own: a job that hangs (one GPU job once
    never returned, holding its card for the rest of the sweep) is killed on its card at that
    limit and reported, and the sweep goes on. Here the limit (1 s) is shorter than starting the
    harness (importing torch), so the one job runs past it."""
    csv_import(tmp_path / "cpu.csv", small_cpu_rows(1))
    out = tmp_path / "controlled"

    figures = loop.sweep(
        gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=1, job_timeout_s=1, log=print
    )

    (measure,) = RerunJob.objects.filter(kind=JobKind.MEASURE)  # not sent a second time
    assert measure.state == JobState.FAILED and measure.timed_out, (measure.state, measure.error)
    assert "timed out" in measure.error
    assert (figures["measured"], figures["left"], len(figures["failed"])) == (0, 0, 1), figures
    assert "timed out" in figures["failed"][0]
    assert figures["elapsed_s"] < DEADLINE_S / 2  # it ended on its own, long before the deadline
    assert controlled_runs().count() == 0
    # Recorded beside the exports, so that the next sweep under the same limit does not try it.
    (timeout,) = timeouts_read(out, "cpu")
    assert (timeout.kernel, timeout.provider, timeout.workload) == (
        measure.kernel.slug,
        measure.provider,
        measure.workload.digest,
    )
    assert timeout.ran_s >= 1 and "timed out" in timeout.error

    again = loop.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, job_timeout_s=1, log=print)

    assert (again["measured"], again["skipped_after_timeout_or_out_of_memory"], again["failed"]) == (
        0,
        1,
        [],
    ), again
    assert RerunJob.objects.filter(kind=JobKind.MEASURE).count() == 1


def test_a_sweep_whose_worker_cannot_start_stops_saying_why(fleet_env, tmp_path, monkeypatch):
    """A worker that exits (here its settings refuse a stale-after not above twice the heartbeat)
    ends the sweep at once with the end of its log, rather than leaving it to wait out its
    deadline for jobs nobody runs."""
    monkeypatch.setenv("JOB_STALE_AFTER", "0.5")
    csv_import(tmp_path / "cpu.csv", small_cpu_rows(1))

    figures = loop.sweep(
        gpu_slug="cpu", gpus=1, out=tmp_path / "controlled", deadline_s=DEADLINE_S, limit=1, log=print
    )

    assert figures["elapsed_s"] < DEADLINE_S / 2, figures
    assert figures["measured"] == 0 and len(figures["failed"]) == 1, figures
    assert "exited with status" in figures["failed"][0]
    assert not RerunJob.objects.filter(state__in=["queued", "running"]).exists()
