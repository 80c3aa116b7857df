"""The shipped GPU sweep files (registry/sources/kernelbench/data/gpu/, those shipped before
2026-12-07) recorded on KernelBench's history as `load_bundled_data` records them, in bulk, compared with what the line-by-line recorder
(one transaction a line, through `kernelbench_measurement_record` and `rerun_record_result`) left
on 2026-12-07 at commit c853a84, before the bulk path replaced it: every controlled run (digest,
rank, manifest and every other field), every measure job and every rerun job (samples, interval,
card, environment, protocol), row by row, and each file's count of measurements, reruns and lines
left unchanged. Sequences start from one, as on a fresh database: a measured run's digest names its
measure job's primary key. Left out is what the clock sets (creation and update times, a rerun's
finish time: when it was recorded) and a rerun's lease (a random attempt id).

What a judgement decides (a rerun's verdict, interval, state and the judgement's notes in its
sampling; each run's level; the issue reports and audit entries) is the verdict rule's of the day,
which another change may move on purpose: the test checks it against the single job's path as the
code stands, every rerun judged again by itself (`rerun_rejudge`) keeping its verdict and every
run its level, and the reports and audit entries as recording the reruns one at a time, in order,
leaves them (`one_at_a_time_trail`). Before it was removed, the line-by-line recorder left the same
judgements, reports and audit entries as the bulk path, row for row, under the verdict rule of
c853a84 and under 28b6391's.

fixtures/gpu-sweep-recorded.json.gz holds, for each row, the fields that name it and a digest of
the rest (`recorded()` below, the same on SQLite and on PostgreSQL)."""

import gzip
import hashlib
import json
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings

from registry.models import CONTROLLED_SOURCE_SLUG, BenchmarkRun, EvidenceLevel, Verdict
from registry.reruns.models import JobKind, JobState, RerunJob
from registry.reruns.services.record import LEVEL_AUDIT_ACTION, evidence_level_due, rerun_rejudge
from registry.sources.kernelbench import services
from registry.sources.kernelbench.measurements import gpu_sweep_record
from registry.sources.kernelbench.services import GPU_DIR, bundled_load, kernelbench_import
from tests.sources.kernelbench.conftest import write_folder
from tests.sources.kernelbench.test_cpu_harness import small_version

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gpu-sweep-recorded.json.gz"
RUN_KEYS = {
    "source__slug", "kernel__slug", "implementation__digest", "workload__digest",
    "protocol__digest", "environment__digest", "superseded_by__digest", "first_import_id", "origin_id",
}  # fmt: skip
# What a judgement decides: a rerun's own fields, and what it notes in its sampling.
JUDGED = {
    "verdict",
    "deviation",
    "deviation_low",
    "deviation_high",
    "tolerance",
    "verdict_note",
    "judged_under",
    "state",
    "evidence_level",
}
JUDGED_SAMPLING = {"basis", "same_gpu", "verdict_model"}
# What recording a line adds to its sampling since the fixture was recorded: the program a compiled
# job timed, from the shipped replay (registry/sources/kernelbench/programs.py); checked apart by
# every_compiled_job_holds_its_program.
ADDED_SAMPLING = {"program"}
JOB_KEYS = {
    "run__digest", "result_run__digest", "kernel__slug", "workload__digest", "requested_by_id",
}  # fmt: skip


def _plain(value):
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    raise TypeError(f"{value!r} is not JSON")


def _digest(fields: dict) -> str:
    text = json.dumps(fields, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _rows(queryset, fields: list[str], shown: list[str]) -> list[list]:
    """Each row: the `shown` fields as they are, then a digest of the others but what a judgement
    decides."""
    rows = []
    for values in queryset.values(*fields):
        rest = {name: value for name, value in values.items() if name not in shown and name not in JUDGED}
        if isinstance(rest.get("sampling"), dict):
            rest["sampling"] = {
                k: v for k, v in rest["sampling"].items() if k not in JUDGED_SAMPLING | ADDED_SAMPLING
            }
        rows.append([*(_plain(values[n]) if isinstance(values[n], datetime) else values[n] for n in shown),
                     _digest(rest)])  # fmt: skip
    return rows


def _own_fields(model, left_out: set[str]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if not f.is_relation and f.attname not in left_out]


def recorded() -> dict:
    """What recording the sweep files leaves, by row, but what a judgement decides."""
    runs = BenchmarkRun.objects.filter(source__slug=CONTROLLED_SOURCE_SLUG).order_by("pk")
    run_fields = [*_own_fields(BenchmarkRun, {"id", "published_at", "updated_at"}), *sorted(RUN_KEYS)]
    jobs = RerunJob.objects.order_by("pk")
    job_fields = [*_own_fields(RerunJob, {"created_at", "lease"}), *sorted(JOB_KEYS)]
    rerun_fields = [name for name in job_fields if name != "finished_at"]
    shown_job = ["id", "kind", "run__digest", "result_run__digest"]
    return {
        "runs": _rows(runs, run_fields, ["external_id", "digest", "rank", "group_size"]),
        "measure_jobs": _rows(jobs.filter(kind="measure"), job_fields, shown_job),
        "rerun_jobs": _rows(jobs.filter(kind="rerun"), rerun_fields, shown_job),
    }


def counted(summary: str) -> dict:
    """A file's outcome ("19 rerun agrees, 1 rerun disagrees") as its counts of each way, all
    reruns as one."""
    counts = Counter()
    for part in summary.split(", "):
        count, way = part.split(" ", 1)
        counts["rerun" if way.startswith("rerun ") else way] += int(count)
    return dict(counts)


def bundled_outcomes() -> dict:
    return {name: summary for name, summary in bundled_load().items() if name != "kernelbench"}


@pytest.fixture
def files_the_fixture_holds(tmp_path, monkeypatch) -> Path:
    """The shipped sweep files the line-by-line recorder recorded (the fixture's outcomes name
    them), alone in a folder the load reads: files shipped after it was removed have no rows of
    its to compare with (`load_bundled_data` records them on the same bulk path,
    tests/sources/test_everything_that_ships.py)."""
    folder = tmp_path / "gpu"
    folder.mkdir()
    expected = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    for name in expected["outcomes"]:
        shipped = GPU_DIR / name.removeprefix("kernelbench ")
        (folder / shipped.name).symlink_to(shipped)
    monkeypatch.setattr(services, "GPU_DIR", folder)
    return folder


@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_the_shipped_sweep_files_record_the_same_rows_as_the_line_by_line_recorder_and_again_nothing(
    files_the_fixture_holds,
):
    expected = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    outcomes = bundled_outcomes()
    assert {name: counted(summary) for name, summary in outcomes.items()} == expected["outcomes"]
    found = recorded()
    every_compiled_job_holds_its_program(files_the_fixture_holds)
    for table, rows in expected["rows"].items():
        assert len(found[table]) == len(rows), table
        for number, (row, wanted) in enumerate(zip(found[table], rows, strict=True)):
            assert row == wanted, f"{table}, row {number}"
    assert reports_and_audits() == one_at_a_time_trail()
    again = bundled_outcomes()
    assert len(again) == len(list(files_the_fixture_holds.glob("*.jsonl.gz"))) == len(expected["outcomes"])
    assert all("measured" not in summary and "rerun" not in summary for summary in again.values()), again
    assert recorded() == found
    judged_as_one_at_a_time()
    assert recorded() == found


def every_compiled_job_holds_its_program(folder: Path) -> None:
    """Each job of a compiled line holds the program the shipped replay gives that line; no eager
    job holds one."""
    from registry.sources.kernelbench import programs
    from registry.sources.kernelbench.gpu_sweep import output_lines

    wanted = Counter()
    for path in folder.glob("*.jsonl.gz"):
        for text in output_lines(path):
            entry = programs.annotate(path.name, json.loads(text)) if text.strip() else {}
            if entry.get("result") and entry["implementation"] != "eager":
                wanted[json.dumps(entry["result"]["sampling"]["program"]["sizes"], sort_keys=True)] += 1
    held = RerunJob.objects.filter(sampling__has_key="program").values_list("sampling", flat=True)
    assert sum(wanted.values()) > 0
    assert Counter(json.dumps(s["program"]["sizes"], sort_keys=True) for s in held) == wanted
    assert not RerunJob.objects.filter(sampling__has_key="program", provider="eager").exists()


def judged_as_one_at_a_time() -> None:
    """Every recorded rerun judged again by itself (`rerun_rejudge`: the single job's judgement and
    `run_level_settle`) keeps its verdict, and no run's level moves."""
    levels = dict(BenchmarkRun.objects.values_list("pk", "evidence_level"))
    for pk in RerunJob.objects.filter(kind=JobKind.RERUN).order_by("pk").values_list("pk", flat=True):
        before, now = rerun_rejudge(job_id=pk) or ("", "")
        assert before == now, f"rerun job #{pk}: {before} when recorded, {now} judged again by itself"
    assert dict(BenchmarkRun.objects.values_list("pk", "evidence_level")) == levels


def one_at_a_time_trail() -> list[tuple]:
    """The issue reports and level audits that recording the stored reruns one at a time, in order
    (`rerun_record_result`), leaves: a report for each that disagrees, then its run's level settled
    by the one rule (`evidence_level_due`) over the run's reruns so far, audited where it moves."""
    runs = BenchmarkRun.objects.select_related("source").in_bulk()
    level, agreeing, trail = {}, defaultdict(list), []
    for job in RerunJob.objects.filter(kind=JobKind.RERUN).exclude(state=JobState.FAILED).order_by("pk"):
        run = runs[job.run_id]
        if job.verdict == Verdict.DISAGREES:
            trail.append(("filed", job.pk))
        if job.verdict == Verdict.AGREES:
            agreeing[run.pk].append((job.verdict, job.sampling, job.gpu_slug))
        due, before = (
            evidence_level_due(run=run, reruns=agreeing[run.pk]),
            level.get(run.pk, EvidenceLevel.MEASURED),
        )
        if due != before:
            trail.append(
                (LEVEL_AUDIT_ACTION, run.pk, before, due, f"Rerun job #{job.pk} recorded.", str(run))
            )
            level[run.pk] = due
    assert {pk: run.evidence_level for pk, run in runs.items() if pk in level} == level
    return trail


def reports_and_audits() -> list[tuple]:
    """The issue reports filed and audit entries written, in order, as `one_at_a_time_trail` has them."""
    from attestations.models import AuditEntry, IssueReport

    reports = IssueReport.objects.in_bulk()
    found = []
    for entry in AuditEntry.objects.order_by("pk"):
        if entry.action == "filed":
            report = reports[entry.object_id]
            assert report.reporter_id is None and report.state == "open", report
            found.append(("filed", int(re.match(r"Controlled rerun job #(\d+) ", report.description)[1])))
        else:
            fields = (entry.object_id, entry.from_state, entry.to_state, entry.reason, entry.object_repr)
            found.append((entry.action, *fields))
    assert len(reports) == sum(1 for row in found if row[0] == "filed")
    return found


def sweep_line(sha256: str, *, card: str, at: str, shift: float = 0.0) -> str:
    """A gpu_sweep line of an H100's measurement: three blocks of ten samples."""
    samples = [1.0 + shift + 0.002 * ((i * 7) % 10) for i in range(30)]
    ordered = sorted(samples)
    result = {
        "median": ordered[15], "p20": ordered[6], "p80": ordered[24], "ci_low": ordered[12],
        "ci_high": ordered[18], "samples": samples, "sampling": {"sample_blocks": [i // 10 for i in range(30)]},
        "upstream": {}, "gpu_uuid": card, "gpu_state": {},
        "environment": {"gpu_name": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "cuda": "13.0"},
    }  # fmt: skip
    timing = dict(settings.CONTROLLED_TIMING)
    return json.dumps(
        {"sha256": sha256, "implementation": "eager", "timing": timing, "finished_at": at, "result": result}
    )


@pytest.mark.django_db
def test_a_file_that_measures_a_problem_and_then_measures_it_again_records_the_second_as_its_rerun(tmp_path):
    """A line measured again later in the same file (none of the shipped files has one) is a rerun of
    the run the earlier line makes: that line's jobs and run are written first."""
    kernelbench_import(path=write_folder(tmp_path / "kb", [small_version()]))
    of = BenchmarkRun.objects.filter(source__slug="kernelbench").select_related("workload").first()
    sha256 = of.workload.spec["problem"]["sha256"].removeprefix("sha256:")
    file = tmp_path / "again.jsonl"
    lines = [
        sweep_line(sha256, card="GPU-a", at="2026-12-06T03:00:00Z"),
        sweep_line(sha256, card="GPU-b", at="2026-12-06T04:00:00Z", shift=0.001),
        sweep_line(sha256, card="GPU-b", at="2026-12-06T04:00:00Z", shift=0.001),
        sweep_line(sha256, card="GPU-c", at="2026-12-06T05:00:00Z", shift=0.5),
    ]
    file.write_text("\n".join(lines) + "\n")
    outcome = gpu_sweep_record(path=file)
    assert outcome == {"measured": 1, "rerun agrees": 1, "unchanged": 1, "rerun disagrees": 1}
    run = BenchmarkRun.objects.get(source__slug=CONTROLLED_SOURCE_SLUG)
    reruns = list(run.rerun_jobs.order_by("pk"))
    assert [(job.gpu_uuid, job.verdict) for job in reruns] == [("GPU-b", "agrees"), ("GPU-c", "disagrees")]
    assert run.measured_by_jobs.get().pk < reruns[0].pk
    assert run.evidence_level == EvidenceLevel.REPRODUCED
    assert run.issue_reports.count() == 1
    assert gpu_sweep_record(path=file) == {"unchanged": 4}
    judged_as_one_at_a_time()
