"""A KernelBench problem's reference measured on the CPU under kernelindex-cpu-v1 (a real torch CPU
build, a real child process), and recorded as a controlled run: two small level-1 problems as
upstream first published them (commit cf8edaab, 2024-12-01)."""

import gzip
import hashlib
import json
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

from registry import digests
from registry.integrity import registry_verify
from registry.models import BenchmarkRun, EvidenceLevel
from registry.sources.kernelbench.history import versions
from registry.sources.kernelbench.services import BUNDLED, kernelbench_import
from tests.sources.kernelbench.conftest import row, write_folder

pytestmark = pytest.mark.django_db
FIRST = versions(BUNDLED)[0]
SMALL = ("100_HingeLoss.py", "41_Max_Pooling_1D.py")
TIMING = {"budget_s": 1.0, "min_samples": 30, "max_samples": 5000}


def small_version() -> dict:
    """A version of the two small problems as upstream first published them, with an L40S row each."""
    return {
        "subject": "add baseline times",
        "date": "2024-12-01T13:56:42-08:00",
        "files": {"results/timing/L40S/baseline_time_torch.json": {"level1": {f: row(0.05) for f in SMALL}}},
        "problems": {("level1", f): FIRST.problem_text(FIRST.problems[("level1", f)]) for f in SMALL},
    }


@pytest.fixture
def small_problems(tmp_path):
    kernelbench_import(path=write_folder(tmp_path / "kb", [small_version()]))
    return BenchmarkRun.objects.filter(source__slug="kernelbench")


def test_the_harness_mapping_imports_no_django():
    code = (
        "import sys, registry.sources.kernelbench.harness; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("problem", SMALL)
def test_a_small_level_1_problem_is_measured_on_the_cpu_and_recorded(small_problems, problem, capsys):
    of = small_problems.get(kernel__description__contains=problem)
    with override_settings(CONTROLLED_TIMING={**settings.CONTROLLED_TIMING, **TIMING}):
        call_command("measure_kernelbench", str(of.pk))
    measured = BenchmarkRun.objects.get(source__slug="kernelindex-controlled")
    assert measured.evidence_level == EvidenceLevel.MEASURED
    assert measured.workload_id == of.workload_id and measured.kernel_id == of.kernel_id
    assert measured.environment.product == "CPU" and measured.protocol.name == "kernelindex-cpu-v1"
    job = measured.measured_by_jobs.get()
    assert len(job.samples) >= 30 and job.p20 <= job.median <= job.p80
    assert job.upstream["num_trials"] == 100 and job.upstream["mean"] > 0
    assert measured.manifest["items"][0]["spec"]["results"]["samples"] == job.samples
    # Written by the recorder's measured_run_from_job from KernelBench's description: the results
    # as KernelBench's measurements were always stated (no source metrics repeated), so the
    # shipped ones keep their digests.
    results = measured.manifest["items"][0]["spec"]["results"]
    assert set(results) == {"median", "p20", "p80", "samples", "medianInterval95"}
    assert results["medianInterval95"] == [job.ci_low, job.ci_high]
    assert measured.manifest["items"][0]["metadata"]["labels"] == {"job": job.pk}
    assert measured.external_id.endswith(f"-job{job.pk}") and measured.external_id.startswith(
        f"{of.kernel.slug}/eager/cpu/"
    )
    assert measured.digest == digests.digest(measured.manifest)
    assert list(registry_verify()) == []
    page = measured.get_absolute_url()
    assert "upstream" in capsys.readouterr().out
    assert Client().get(page).status_code == 200


def test_the_gpu_sweep_measures_each_problem_in_blocks_in_one_process_and_resumes(tmp_path):
    """gpu_sweep (what a GPU host runs) on the CPU protocol: each problem of the newest version
    measured in three blocks by one serving child, a line each, and a second sweep on the same file
    measures nothing again."""
    version = small_version()
    problems = version["problems"]
    folder = write_folder(tmp_path / "kb", [version])
    out = tmp_path / "out.jsonl"
    command = [
        sys.executable, "-m", "registry.sources.kernelbench.gpu_sweep", "--out", str(out),
        "--archive", str(folder), "--device", "cpu", "--budget", "0.3", "--levels", "level1",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(e["problem"] for e in entries) == sorted(SMALL), done.stdout
    for entry in entries:
        result = entry["result"]
        assert len(result["samples"]) >= 30 and result["p20"] <= result["median"] <= result["p80"]
        assert sorted(set(result["sampling"]["sample_blocks"])) == [0, 1, 2]
        assert len(result["sampling"]["sample_blocks"]) == len(result["samples"])
        assert entry["sha256"] == hashlib.sha256(problems[("level1", entry["problem"])].encode()).hexdigest()
    again = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    assert again.stdout.startswith("0 to measure (2 already in")
    assert len(out.read_text().splitlines()) == 2


def test_a_gpu_sweep_leaves_out_what_a_skip_file_holds(tmp_path, capsys):
    """--skip FILE: what an earlier (shipped) sweep file holds is not measured again, and the new
    file holds only new measurements; a --skip file that is not there is refused."""
    from registry.sources.kernelbench import gpu_sweep

    version = small_version()
    folder = write_folder(tmp_path / "kb", [version])
    shipped = tmp_path / "shipped.jsonl.gz"
    first = hashlib.sha256(version["problems"][("level1", SMALL[0])].encode()).hexdigest()
    shipped.write_bytes(
        gzip.compress(json.dumps({"sha256": first, "implementation": "eager"}).encode() + b"\n")
    )
    out = tmp_path / "new.jsonl"
    base = ["--out", str(out), "--archive", str(folder), "--device", "cpu", "--levels", "level1"]
    assert gpu_sweep.main([*base, "--skip", str(shipped), "--deadline", "-1"]) == 0
    assert capsys.readouterr().out.startswith(f"1 to measure (0 already in {out}, 1 skipped as in {shipped})")
    assert gpu_sweep.main([*base, "--implementation", "compile-inductor-default", "--skip", str(shipped),
                           "--deadline", "-1"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("2 to measure (0 already in")
    with pytest.raises(SystemExit):
        gpu_sweep.main([*base, "--skip", str(tmp_path / "missing.jsonl")])
    assert "no such file" in capsys.readouterr().err
    assert not out.exists() or out.read_text() == ""


def test_a_gpu_sweep_file_is_recorded_as_measurements_then_reruns_and_twice_changes_nothing(
    small_problems, tmp_path
):
    """What a GPU host's sweep writes, recorded by record_kernelbench_gpu: here two CPU sweeps of the
    two problems (the same code path on kernelindex-cpu-v1). The first file's lines become measured
    runs; the second's become reruns of them, judged; a malformed file is refused whole."""
    from registry.reruns.models import JobKind, RerunJob

    files = []
    for name in ("first.jsonl", "second.jsonl"):
        out = tmp_path / name
        subprocess.run(
            [sys.executable, "-m", "registry.sources.kernelbench.gpu_sweep", "--out", str(out),
             "--archive", str(tmp_path / "kb"), "--device", "cpu", "--budget", "0.3", "--levels", "level1"],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        files.append(out)
    bad = tmp_path / "bad.jsonl"
    lines = files[0].read_text().splitlines()
    broken = json.loads(lines[1])
    broken["result"]["samples"] = [1.0, -2.0, 3.0, 4.0]
    bad.write_text(lines[0] + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(CommandError, match=r"bad.jsonl, line 2: the result needs four or more positive"):
        call_command("record_kernelbench_gpu", str(bad))
    assert not BenchmarkRun.objects.filter(source__slug="kernelindex-controlled").exists()

    call_command("record_kernelbench_gpu", str(files[0]))
    measured = BenchmarkRun.objects.filter(source__slug="kernelindex-controlled")
    assert measured.count() == 2
    assert {run.evidence_level for run in measured} == {EvidenceLevel.MEASURED}
    for run in measured:
        job = run.measured_by_jobs.get()
        assert sorted(set(job.sampling["sample_blocks"])) == [0, 1, 2]
        assert run.protocol.name == "kernelindex-cpu-v1"

    call_command("record_kernelbench_gpu", str(files[1]), str(files[1]))
    reruns = RerunJob.objects.filter(kind=JobKind.RERUN)
    assert reruns.count() == 2
    for rerun in reruns:
        assert rerun.verdict in {"agrees", "disagrees", "inconclusive"}
        assert rerun.deviation_low <= rerun.deviation <= rerun.deviation_high
    # The level follows the one rule (raises_level): a run whose CPU rerun agrees is `reproduced`
    # (a CPU has no card to tell apart, tests/reruns/test_two_recorded_cards.py), any other stays
    # `measured`. Which verdict a CPU timing gets varies from run to run; the level must follow it.
    for run in measured.all():
        agreed = run.rerun_jobs.filter(kind=JobKind.RERUN, verdict="agrees").exists()
        assert run.evidence_level == (EvidenceLevel.REPRODUCED if agreed else EvidenceLevel.MEASURED)
    assert list(registry_verify()) == []
