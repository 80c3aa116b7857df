"""The controlled sweep through the real pipeline on the CPU (`manage.py controlled_sweep --gpu
cpu`): its own fleet of Celery worker processes measures each target, reruns each result, the
recorder gives every rerun a verdict, and the export is data that loads again. Cut short, it goes
on where it stopped: a second sweep over a longer list measures only what the first left."""

import pytest

from registry.models import BenchmarkRun, JobKind, RerunJob
from registry.reruns import controlled, sweep
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


def test_a_sweep_measures_reruns_judges_and_exports_then_resumes_where_it_stopped(fleet_env, tmp_path):
    csv_import(tmp_path / "cpu.csv", small_cpu_rows(3))
    out = tmp_path / "controlled"
    out.mkdir()

    first = sweep.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=2, log=print)

    assert (first["measured"], first["reruns"], first["failed"], first["left"]) == (2, 2, [], 0), first
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
    second = sweep.sweep(gpu_slug="cpu", gpus=1, out=out, deadline_s=DEADLINE_S, limit=3, log=print)

    assert (second["measured"], second["reruns"], second["left"]) == (1, 1, 0), second
    assert controlled_runs().count() == 3
    assert RerunJob.objects.filter(kind=JobKind.MEASURE).count() == 3
    assert len(controlled.controlled_document_read(exported)["runs"]) == 3
