"""The controlled H200 runs that ship with the project load with the evidence that justifies them."""

import functools
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from registry.models import BenchmarkRun
from registry.reruns.controlled import (
    BUNDLED_CONTROLLED_DIR,
    controlled_document_read,
    controlled_files,
    controlled_runs_load,
)
from registry.reruns.models import RerunJob
from registry.services import ImportRejected
from registry.sources.liger import importer as liger
from registry.sources.liger.services import BUNDLED_LIGER_CSV

H200_FILE = BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz"
REFERENCE = "batch8-hidden4096-intermediate11008-seq8192-bf16"


@functools.cache
def shipped_entries() -> tuple[dict, ...]:
    """Every shipped controlled run's entry, read once per process (a second of CPU a read): the
    counts below are taken from it again and again, and nothing changes it."""
    return tuple(
        entry
        for path in controlled_files(BUNDLED_CONTROLLED_DIR)
        for entry in controlled_document_read(path)["runs"]
    )


ROOT = Path(__file__).resolve().parents[2]


def shipped_agreeing() -> int:
    """Runs that a rerun with an `agrees` verdict on another recorded card backs: only those load
    at `reproduced`. A rerun judged by the old fixed tolerance has no verdict and backs none, and
    one whose run's measuring card is not recorded (8 older GeGLU runs) cannot show two cards."""
    return sum(
        1
        for entry in shipped_entries()
        if entry["run"]["evidence_level"] == "reproduced"
        and any(
            j["role"] == "rerun"
            and j["state"] == "succeeded"
            and j.get("verdict") == "agrees"
            and (j.get("sampling") or {}).get("same_gpu") is False
            for j in entry["jobs"]
        )
    )


def shipped_jobs(**match) -> int:
    return sum(
        1
        for entry in shipped_entries()
        for job in entry["jobs"]
        if all(job.get(key) == value for key, value in match.items())
    )


def _write_before_and_after_its_reruns(folder, document: dict, entry: dict) -> None:
    """`later.json` holds `entry` as shipped; `earlier.json` the same run as exported before any
    rerun: `measured`, with its measure job alone."""
    earlier = json.loads(json.dumps(entry))
    earlier["run"]["evidence_level"] = "measured"
    earlier["jobs"] = [job for job in earlier["jobs"] if job["role"] == "measured"]
    for name, runs in (("earlier.json", [earlier]), ("later.json", [entry])):
        (folder / name).write_text(json.dumps({**document, "runs": runs}))


@pytest.fixture(scope="class")
def shipped_loaded(django_db_setup, django_db_blocker):
    """Every shipped file loaded once for the class, committed, and removed after it: a load of
    them all is this module's dearest step, and each test here reads what it left in a transaction
    rolled back after it. The tests that load other files are in another class."""
    with django_db_blocker.unblock():
        summary = controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)
    yield summary
    with django_db_blocker.unblock():
        call_command("flush", "--noinput", verbosity=0)


@pytest.mark.django_db
class TestShippedH200RunsLoaded:
    def test_they_load_as_measured_and_reproduced_runs_with_their_jobs(self, shipped_loaded):
        entries = shipped_entries()
        summary = shipped_loaded

        runs = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled", environment__slug="nvidia-h200"
        )
        assert (summary.rows, summary.created) == (len(entries), len(entries))
        assert len({entry["kernel"]["slug"] for entry in entries}) == 34
        assert runs.filter(evidence_level="reproduced").count() == shipped_agreeing() > 0
        assert runs.filter(evidence_level="measured").count() == len(entries) - shipped_agreeing()
        assert RerunJob.objects.filter(kind="measure", state="succeeded").count() == len(entries)
        # Every rerun is kept as history, whatever level its run now loads at.
        for state in ("succeeded", "diverged", "failed"):
            assert RerunJob.objects.filter(kind="rerun", state=state).count() == shipped_jobs(
                kind="rerun", state=state
            )
        for verdict in ("agrees", "disagrees", "inconclusive"):
            assert RerunJob.objects.filter(verdict=verdict).count() == shipped_jobs(verdict=verdict) > 0
        # Loaded runs keep their implementation's provider (older exports left it out).
        assert not runs.filter(implementation__provider="").exists()
        assert {run.rank for run in runs} - {None} and min(run.rank for run in runs if run.rank) == 1

    def test_the_reference_workload_under_kernelindex_cuda_v1(self, shipped_loaded):
        """Upstream's timer on an H200 gave huggingface 54.8 ms and liger 53.4 ms for the backward
        pass; the controlled-runs report gives how far the controlled figures are from those (liger's is not
        within 2%)."""
        backward = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled",
            workload__slug=REFERENCE,
            operation_mode="backward",
            metric="latency",
            protocol__comparability_family="kernelindex/cuda-v1",
        )
        medians = {run.implementation.provider: run.median for run in backward}
        assert medians["huggingface"] == pytest.approx(54.8, rel=0.02)
        assert medians["liger"] < medians["huggingface"]
        job = RerunJob.objects.get(result_run=backward.get(implementation__provider="liger"))
        assert len(job.samples) >= 30
        assert job.sampling["stop"] in ("precision", "budget")
        assert job.upstream["median"] == pytest.approx(53.4, rel=0.02)  # upstream's own call, unchanged
        assert (job.environment["gpu_name"], job.environment["liger_kernel"]) == ("NVIDIA H200", "0.8.5")
        assert job.environment["torch"] and job.environment["triton"] and job.environment["driver"]
        assert job.gpu_uuid.startswith("GPU-")

    def test_loading_again_changes_nothing(self, shipped_loaded):
        jobs = RerunJob.objects.count()

        again = controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        assert (again.created, again.unchanged) == (0, len(shipped_entries()))
        assert RerunJob.objects.count() == jobs


@pytest.mark.django_db
class TestShippedH200Runs:
    def test_a_run_shipped_as_reproduced_by_a_verdictless_rerun_loads_at_measured(self, tmp_path):
        """The GeGLU runs shipped before verdicts were `reproduced` by a fixed 5% tolerance: a file
        that still says so loads them at `measured`, their reruns kept as history."""
        document = controlled_document_read(H200_FILE)
        entry = next(
            e
            for e in document["runs"]
            if any(j["role"] == "rerun" and j["state"] == "succeeded" for j in e["jobs"])
        )
        entry["run"]["evidence_level"] = "reproduced"
        for job in entry["jobs"]:
            job["verdict"] = ""
        document["runs"] = [entry]
        path = tmp_path / "before-verdicts.json"
        path.write_text(json.dumps(document))

        controlled_runs_load(path=path)

        run = BenchmarkRun.objects.get(digest=entry["run"]["digest"])
        assert run.evidence_level == "measured"
        assert RerunJob.objects.filter(run=run, kind="rerun").count() == sum(
            j["role"] == "rerun" for j in entry["jobs"]
        )

    def test_a_later_export_adds_the_reruns_a_loaded_run_lacked_and_raises_its_level(self, tmp_path):
        """A registry loaded from an earlier export gets the reruns judged since when it loads the
        later one (`load_bundled_data` after a pull), not only the runs that are new."""
        document = controlled_document_read(H200_FILE)
        entry = next(
            e
            for e in document["runs"]
            if e["run"]["evidence_level"] == "reproduced"
            and any(j["role"] == "rerun" and j.get("verdict") == "agrees" for j in e["jobs"])
        )
        _write_before_and_after_its_reruns(tmp_path, document, entry)
        controlled_runs_load(path=tmp_path / "earlier.json")
        run = BenchmarkRun.objects.get(digest=entry["run"]["digest"])
        assert (run.evidence_level, RerunJob.objects.filter(run=run).count()) == ("measured", 0)

        later = controlled_runs_load(path=tmp_path / "later.json")

        run.refresh_from_db()
        assert (later.created, later.extended, later.unchanged) == (0, 1, 0)
        assert run.evidence_level == "reproduced"
        assert run.median == entry["run"]["median"]
        assert RerunJob.objects.filter(run=run).count() == sum(j["role"] == "rerun" for j in entry["jobs"])
        assert RerunJob.objects.filter(result_run=run).count() == 1
        again = controlled_runs_load(path=tmp_path / "later.json")
        assert (again.extended, again.unchanged) == (0, 1)
        assert RerunJob.objects.filter(run=run).count() == sum(j["role"] == "rerun" for j in entry["jobs"])

    def test_an_older_export_never_lowers_a_loaded_runs_level(self, tmp_path):
        document = controlled_document_read(H200_FILE)
        entry = next(e for e in document["runs"] if e["run"]["evidence_level"] == "reproduced")
        _write_before_and_after_its_reruns(tmp_path, document, entry)
        controlled_runs_load(path=tmp_path / "later.json")
        jobs = RerunJob.objects.count()

        summary = controlled_runs_load(path=tmp_path / "earlier.json")

        assert (summary.extended, summary.unchanged) == (0, 1)
        assert BenchmarkRun.objects.get(digest=entry["run"]["digest"]).evidence_level == "reproduced"
        assert RerunJob.objects.count() == jobs

    def test_their_workloads_are_the_bundled_liger_workloads(self):
        shipped = {entry["workload"]["digest"] for entry in shipped_entries()}
        bundled = {row.workload["digest"] for row in liger.parse_file(BUNDLED_LIGER_CSV.read_bytes())}

        assert shipped <= bundled


@pytest.mark.django_db
class TestALevelWithoutItsEvidenceIsRefused:
    def test_reproduced_without_a_succeeded_rerun_is_refused(self, tmp_path):
        document = controlled_document_read(H200_FILE)
        entry = next(e for e in document["runs"] if e["run"]["evidence_level"] == "reproduced")
        entry["jobs"] = [job for job in entry["jobs"] if job["role"] == "measured"]
        document["runs"] = [entry]
        path = tmp_path / "doctored.json"
        path.write_text(json.dumps(document))

        with pytest.raises(ImportRejected, match="without a succeeded rerun job"):
            controlled_runs_load(path=path)

        assert BenchmarkRun.objects.count() == 0
        assert RerunJob.objects.count() == 0


# `load_bundled_data` over everything that ships: tests/sources/test_everything_that_ships.py.
