"""Targets whose job ran past the sweep's time limit: recorded beside the exports, and not tried
again by a sweep under a limit no longer than the job ran. A recorded job covers its kernel and
provider's targets of every pass on the same configuration swept as far or further; a longer
limit tries them again. A job out of memory on both attempts is recorded too and covers its own
pass only, under any limit. The file is checked as it is read."""

import json
from collections import defaultdict, deque
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from registry.models import Workload
from registry.reruns.harness.session import TIMED_OUT
from registry.reruns.models import JobState, RerunJob
from registry.reruns.sweep import loop, workers
from registry.reruns.sweep.status import progress
from registry.reruns.sweep.targets import targets
from registry.reruns.sweep.timeouts import (
    OUT_OF_MEMORY,
    TIME_LIMIT,
    Timeout,
    TimeoutsFileError,
    timed_out_targets,
    timeouts_path,
    timeouts_read,
    timeouts_write,
)
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import

pytestmark = pytest.mark.django_db
KERNEL = "multi_token_attention"


@pytest.fixture
def mta_source(tmp_path):
    """The bundled Liger data's multi_token_attention rows: a sweep of L from 32 to 1024."""
    lines = BUNDLED_LIGER_CSV.read_text().splitlines(keepends=True)
    path = tmp_path / "mta.csv"
    path.write_text(lines[0] + "".join(line for line in lines[1:] if line.startswith(f"{KERNEL},")))
    liger_import(path=path)
    return targets(gpu_slug="nvidia-h200", kernels=[KERNEL])


def timeout_at(
    L: int, *, provider="liger", ran_s=600.0, operation_mode="backward", cause=TIME_LIMIT
) -> Timeout:
    workload = Workload.objects.get(kernel__slug=KERNEL, x_value=L)
    return Timeout(
        kernel=KERNEL,
        provider=provider,
        operation_mode=operation_mode,
        metric="latency",
        workload=workload.digest,
        x_name="L",
        x_value=float(L),
        ran_s=ran_s,
        gpu_uuid="GPU-card-A",
        started_at="2026-12-03T18:23:04+00:00",
        error="no result in 590 s",
        cause=cause,
    )


def x_of(targets) -> dict:
    workloads = Workload.objects.in_bulk({t.workload_id for t in targets})
    return {t: workloads[t.workload_id].x_value for t in targets}


def test_a_recorded_timeout_covers_its_provider_at_that_size_and_beyond_under_a_shorter_limit(mta_source):
    x = x_of(mta_source)
    covered = timed_out_targets(mta_source, [timeout_at(512)], job_timeout_s=360)

    expected = {t for t in mta_source if t.provider == "liger" and x[t] >= 512}
    assert covered == expected
    # Every pass and metric of that provider, at both sizes the sweep holds from 512 up.
    assert {(t.operation_mode, t.metric) for t in covered} == {
        ("forward", "latency"),
        ("backward", "latency"),
        ("full", "latency"),
        ("full", "memory"),
    }
    assert {x[t] for t in covered} == {512.0, 1024.0}
    # A limit longer than the job ran tries them again; a shorter-lived timeout covers nothing.
    assert timed_out_targets(mta_source, [timeout_at(512)], job_timeout_s=900) == set()
    assert timed_out_targets(mta_source, [timeout_at(512, ran_s=200)], job_timeout_s=360) == set()
    # Another provider's timeout, or another kernel's targets: nothing.
    torch_only = timed_out_targets(mta_source, [timeout_at(1024, provider="torch")], job_timeout_s=360)
    assert torch_only == {t for t in mta_source if t.provider == "torch" and x[t] == 1024}


def test_a_job_out_of_memory_covers_its_own_pass_as_far_or_further_under_any_limit(mta_source):
    x = x_of(mta_source)
    oom = timeout_at(512, operation_mode="full", ran_s=17.0, cause=OUT_OF_MEMORY)

    covered = timed_out_targets(mta_source, [oom], job_timeout_s=900)

    assert covered == {
        t for t in mta_source if t.provider == "liger" and t.operation_mode == "full" and x[t] >= 512
    }
    assert {t.metric for t in covered} == {"latency", "memory"}
    assert {x[t] for t in covered} == {512.0, 1024.0}


def test_the_file_keeps_one_line_per_target_the_longest_run_and_reads_back(tmp_path, mta_source):
    first = timeout_at(1024, ran_s=360.4)
    timeouts_write(tmp_path, "nvidia-h200", [first, timeout_at(512, operation_mode="forward")])
    timeouts_write(tmp_path, "nvidia-h200", [timeout_at(1024, ran_s=590.0), timeout_at(1024, ran_s=100.0)])

    read = timeouts_read(tmp_path, "nvidia-h200")

    assert [(t.operation_mode, t.x_value, t.ran_s) for t in read] == [
        ("backward", 1024.0, 590.0),
        ("forward", 512.0, 600.0),
    ]
    assert timeouts_read(tmp_path, "nvidia-a100") == []
    # A job out of memory outweighs a longer one past a shorter limit: it applies under any limit.
    timeouts_write(tmp_path, "nvidia-h200", [timeout_at(1024, ran_s=20.0, cause=OUT_OF_MEMORY)])
    assert [(t.cause, t.ran_s) for t in timeouts_read(tmp_path, "nvidia-h200")][0] == (OUT_OF_MEMORY, 20.0)
    assert not list(tmp_path.glob(".*partial"))


def test_the_status_counts_the_targets_a_sweep_would_not_try(tmp_path, mta_source):
    before = progress(gpu_slug="nvidia-h200", kernels=[KERNEL], out=tmp_path)
    timeouts_write(tmp_path, "nvidia-h200", [timeout_at(1024)])

    after = progress(gpu_slug="nvidia-h200", kernels=[KERNEL], out=tmp_path)

    assert (
        before["not_tried_after_a_timeout_or_out_of_memory"],
        after["not_tried_after_a_timeout_or_out_of_memory"],
    ) == (0, 4)
    assert after["to_measure"] == before["to_measure"] - 4
    assert after["jobs_left"] == before["jobs_left"] - 8  # a measure job and its rerun each
    longer = progress(gpu_slug="nvidia-h200", kernels=[KERNEL], out=tmp_path, job_timeout_s=900)
    assert longer["to_measure"] == before["to_measure"]

    out = StringIO()
    call_command(
        "controlled_sweep",
        "--status",
        "--gpu",
        "nvidia-h200",
        "--kernel",
        KERNEL,
        "--out",
        str(tmp_path),
        stdout=out,
    )
    assert json.loads(out.getvalue()) == after


def test_a_job_past_the_limit_drops_what_it_covers_from_the_rest_of_the_sweep(mta_source):
    """The sweep on GPU-31441cc4 (2026-12-04) ran liger sparse multi-token attention's forward pass at L 1,024 to the
    360 s limit just after its backward pass had done so: the second job was already queued. Now
    the first timeout cancels the covered jobs not yet claimed and drops the covered targets not
    yet sent; a job a worker holds runs on, and other providers and smaller workloads go on."""
    x = x_of(mta_source)

    def target(provider, L, operation_mode, metric="latency"):
        (found,) = [
            t
            for t in mta_source
            if (t.provider, x[t], t.operation_mode, t.metric) == (provider, L, operation_mode, metric)
        ]
        return found

    backward, forward, full = (target("liger", 1024, mode) for mode in ("backward", "forward", "full"))
    torch_forward = target("torch", 1024, "forward")
    in_flight, attempts = {}, defaultdict(int)
    for sent in (backward, forward, full, torch_forward):
        loop._send_measure(sent, "nvidia-h200", in_flight, attempts, print)
    job_of = {sent: pk for pk, sent in in_flight.items()}
    now = timezone.now()
    RerunJob.objects.filter(pk=job_of[backward]).update(
        state=JobState.FAILED,
        started_at=now - timedelta(seconds=360.4),
        finished_at=now,
        error=f"Harness failed: {TIMED_OUT}",
        timed_out=True,
    )
    RerunJob.objects.filter(pk=job_of[forward]).update(state=JobState.RUNNING, started_at=now)
    pending = deque([target("liger", 1024, "full", "memory"), target("liger", 512, "forward")])
    figures = loop.Progress()

    loop._collect(in_flight, pending, deque(), attempts, figures, True)

    assert sorted(in_flight.values(), key=str) == sorted([forward, torch_forward], key=str)
    assert list(pending) == [target("liger", 512, "forward")]
    assert figures.skipped == 2
    states = dict(RerunJob.objects.filter(pk__in=job_of.values()).values_list("pk", "state"))
    assert [states[job_of[sent]] for sent in (backward, forward, full, torch_forward)] == [
        JobState.FAILED,
        JobState.RUNNING,
        JobState.CANCELLED,
        JobState.QUEUED,
    ]
    (timeout,) = figures.timeouts
    assert (timeout.operation_mode, timeout.x_value) == ("backward", 1024.0) and timeout.ran_s >= 360
    assert len(figures.failed) == 1 and TIMED_OUT in figures.failed[0]


def test_a_file_from_before_the_cause_column_holds_timeouts(tmp_path, mta_source):
    path = timeouts_write(tmp_path, "nvidia-h200", [timeout_at(512, cause=OUT_OF_MEMORY)])
    assert path.read_text().splitlines()[1].endswith(f"\t{OUT_OF_MEMORY}")
    path.write_text("".join(line.rsplit("\t", 1)[0] + "\n" for line in path.read_text().splitlines()))

    (read,) = timeouts_read(tmp_path, "nvidia-h200")

    assert read.cause == TIME_LIMIT and read.x_value == 512.0


def test_a_target_out_of_memory_twice_is_recorded_and_drops_what_it_covers(mta_source):
    """The sweep on GPU-dc22f303 (2026-12-04) sent Hugging Face's ORPO full pass at B = 16 twice in each of two sweeps
    (about 75 s of the card each time): it needs more memory than an H200 has. The second failure
    now records it, and drops the same pass's other metric from the rest of the sweep."""
    x = x_of(mta_source)
    (latency,) = [
        t
        for t in mta_source
        if (t.provider, x[t], t.operation_mode, t.metric) == ("liger", 1024, "full", "latency")
    ]
    (memory,) = [
        t
        for t in mta_source
        if (t.provider, x[t], t.operation_mode, t.metric) == ("liger", 1024, "full", "memory")
    ]
    (forward,) = [
        t
        for t in mta_source
        if (t.provider, x[t], t.operation_mode, t.metric) == ("liger", 1024, "forward", "latency")
    ]
    error = (
        "Harness failed: out of memory: OutOfMemoryError: CUDA out of memory. Tried to allocate 31.31 GiB."
    )
    in_flight, attempts = {}, defaultdict(int)
    pending, figures = deque([memory, forward]), loop.Progress()

    def fail_once():
        loop._send_measure(latency, "nvidia-h200", in_flight, attempts, print)
        now = timezone.now()
        RerunJob.objects.filter(pk__in=list(in_flight)).update(
            state=JobState.FAILED, started_at=now - timedelta(seconds=17), finished_at=now, error=error
        )
        loop._collect(in_flight, pending, deque(), attempts, figures, True)

    fail_once()  # the first time it is sent again: memory another process held may have freed
    assert (list(pending), figures.timeouts) == ([memory, forward, latency], [])

    pending.pop()
    fail_once()

    (recorded,) = figures.timeouts
    assert (recorded.cause, recorded.operation_mode, recorded.x_value) == (OUT_OF_MEMORY, "full", 1024.0)
    assert list(pending) == [forward] and figures.skipped == 1
    assert len(figures.failed) == 1 and OUT_OF_MEMORY in figures.failed[0]


@pytest.mark.parametrize(
    "text, says",
    [
        ("kernel\tprovider\n", "line 1: the header lacks error, gpu_uuid, metric"),
        (None, r"line 3: x_value and ran_s must be numbers, got '\d+\.0' and 'long'"),
        ("cause", "line 2: cause must be one of 'time limit', 'out of memory', got 'swapped'"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_file_and_line(tmp_path, mta_source, text, says):
    path = timeouts_write(tmp_path, "nvidia-h200", [timeout_at(512), timeout_at(1024)])
    if text is None:
        lines = path.read_text().splitlines()
        lines[2] = lines[2].replace("\t600.0\t", "\tlong\t")
        text = "\n".join(lines) + "\n"
    elif text == "cause":
        text = path.read_text().replace(f"\t{TIME_LIMIT}\n", "\tswapped\n", 1)
    path.write_text(text)

    with pytest.raises(TimeoutsFileError, match=says):
        timeouts_read(tmp_path, "nvidia-h200")
    with pytest.raises(CommandError, match=str(timeouts_path(tmp_path, "nvidia-h200"))):
        call_command("controlled_sweep", "--status", "--gpu", "nvidia-h200", "--out", str(tmp_path))


def test_the_fleets_broker_visibility_timeout_outlasts_its_job_limit(monkeypatch):
    """The settings refuse to start a worker whose job limit its broker's visibility timeout would
    not outlast: the sweep raises the visibility timeout for its own workers where it is shorter
    (the pipeline tests' 90 s), and leaves a longer one (the site's 7,200 s) as it is."""
    monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", "90")
    assert workers._time_limits(360) == {"JOB_HARNESS_TIMEOUT": "360", "CELERY_VISIBILITY_TIMEOUT": "600"}
    monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", "7200")
    assert workers._time_limits(360)["CELERY_VISIBILITY_TIMEOUT"] == "7200"
