"""The controlled H200 runs that ship with the project load with the evidence that justifies them."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from registry.importers import liger
from registry.models import BenchmarkRun, RerunJob
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.services import BUNDLED_LIGER_CSV, ImportRejected

H200_FILE = BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json"
REFERENCE = "batch8-hidden4096-intermediate11008-seq8192-bf16"


def shipped_agreeing() -> int:
    """Runs of the shipped file that a rerun with an `agrees` verdict backs: only those load at
    `reproduced`. A rerun judged by the old fixed tolerance has no verdict and backs none."""
    return sum(
        1
        for entry in json.loads(H200_FILE.read_text())["runs"]
        if entry["run"]["evidence_level"] == "reproduced"
        and any(
            j["role"] == "rerun" and j["state"] == "succeeded" and j.get("verdict") == "agrees"
            for j in entry["jobs"]
        )
    )


@pytest.mark.django_db
class TestShippedH200Runs:
    def test_they_load_as_measured_and_reproduced_runs_with_their_jobs(self):
        summary = controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        runs = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled", environment__slug="nvidia-h200"
        )
        assert (summary.rows, summary.created) == (32, 32)
        assert runs.filter(evidence_level="reproduced").count() == shipped_agreeing()
        assert runs.filter(evidence_level="measured").count() == 32 - shipped_agreeing()
        assert RerunJob.objects.filter(kind="measure", state="succeeded").count() == 32
        # Every rerun is kept as history, whatever level its run now loads at.
        assert RerunJob.objects.filter(kind="rerun", state="succeeded").count() == 29
        assert RerunJob.objects.filter(kind="rerun", state="diverged").count() == 3
        # Their own comparison groups: huggingface against liger, per workload, pass and metric.
        assert {run.group_size for run in runs} == {2}
        assert {run.rank for run in runs} <= {1, 2}

    def test_a_run_shipped_as_reproduced_by_a_verdictless_rerun_loads_at_measured(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        for entry in json.loads(H200_FILE.read_text())["runs"]:
            reruns = [j for j in entry["jobs"] if j["role"] == "rerun"]
            if entry["run"]["evidence_level"] == "reproduced" and not any(j.get("verdict") for j in reruns):
                run = BenchmarkRun.objects.get(digest=entry["run"]["digest"])
                assert run.evidence_level == "measured", run.external_id
                assert RerunJob.objects.filter(run=run, kind="rerun").count() == len(reruns)

    def test_the_reference_workload_matches_the_published_h200_figures(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        backward = BenchmarkRun.objects.filter(
            source__slug="kernelindex-controlled", workload__slug=REFERENCE, operation_mode="backward"
        )
        medians = {run.implementation.provider: run.median for run in backward}
        assert medians["huggingface"] == pytest.approx(54.8, rel=0.05)
        assert medians["liger"] == pytest.approx(53.4, rel=0.05)
        job = RerunJob.objects.get(result_run=backward.get(implementation__provider="liger"))
        assert len(job.samples) >= 20
        assert (job.environment["gpu_name"], job.environment["liger_kernel"]) == ("NVIDIA H200", "0.8.5")
        assert job.environment["torch"] and job.environment["triton"] and job.environment["driver"]

    def test_loading_again_changes_nothing(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        again = controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)

        assert (again.created, again.unchanged) == (0, 32)
        assert RerunJob.objects.count() == 64

    def test_their_workloads_are_the_bundled_liger_workloads(self):
        shipped = {entry["workload"]["digest"] for entry in json.loads(H200_FILE.read_text())["runs"]}
        bundled = {
            row.workload["digest"]
            for row in liger.parse_file(BUNDLED_LIGER_CSV.read_bytes())
            if row.kernel["slug"] == "geglu"
        }

        assert len(shipped) == 4
        assert shipped <= bundled


@pytest.mark.django_db
class TestALevelWithoutItsEvidenceIsRefused:
    def test_reproduced_without_a_succeeded_rerun_is_refused(self, tmp_path):
        document = json.loads(H200_FILE.read_text())
        entry = next(e for e in document["runs"] if e["run"]["evidence_level"] == "reproduced")
        entry["jobs"] = [job for job in entry["jobs"] if job["role"] == "measured"]
        document["runs"] = [entry]
        path = tmp_path / "doctored.json"
        path.write_text(json.dumps(document))

        with pytest.raises(ImportRejected, match="without a succeeded rerun job"):
            controlled_runs_load(path=path)

        assert BenchmarkRun.objects.count() == 0
        assert RerunJob.objects.count() == 0


@pytest.mark.django_db
class TestLoadBundledDataCommand:
    def test_it_loads_the_liger_data_then_the_controlled_runs_and_again_changes_nothing(self):
        first, second = StringIO(), StringIO()

        call_command("load_bundled_data", stdout=first)
        call_command("load_bundled_data", stdout=second)

        assert "kernelindex-controlled: 32 rows: 32 created" in first.getvalue()
        assert "kernelindex-controlled: 32 rows: 0 created, 32 unchanged" in second.getvalue()
        assert BenchmarkRun.objects.filter(source__slug="liger-kernel").count() == 2448
        assert BenchmarkRun.objects.filter(evidence_level="reproduced").count() == shipped_agreeing()
