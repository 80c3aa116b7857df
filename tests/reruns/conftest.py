"""Fixtures for controlled runs: a small Liger CSV whose workloads run in a second on a CPU,
and a harness result as the harness reports one (the roles are tests/conftest.py's)."""

import csv
import json

import pytest

from registry.models import BenchmarkRun, Kernel
from registry.reruns.models import RerunJob
from registry.sources.liger.importer import COLUMNS as HEADER
from registry.sources.liger.services import liger_import
from registry.stats import medians as stats

SMALL_GEGLU = (
    '{"bsz": 2, "hidden_size": 64, "intermediate_size": 128, '
    '"hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float32"}'
)


def small_geglu_spec(device: str) -> dict:
    """The job spec a rerun of a SMALL_GEGLU forward-latency row carries to the worker."""
    return {
        "kernel": "geglu",
        "provider": "huggingface",
        "operation_mode": "forward",
        "metric": "latency",
        "x_name": "T",
        "x_value": 16,
        "config": json.loads(SMALL_GEGLU),
        "device": device,
    }


# Valid, but its weights would take 4 TiB: the upstream setup function fails to allocate them.
BROKEN_GEGLU = (
    '{"bsz": 2, "hidden_size": 1048576, "intermediate_size": 1048576, '
    '"hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float32"}'
)


def row(provider="huggingface", mode="forward", metric="speed", gpu="NVIDIA H200", y=(1.0, 0.98, 1.02), **kw):
    unit = "ms" if metric == "speed" else "MB"
    return [
        kw.get("kernel", "geglu"),
        provider,
        mode,
        metric,
        unit,
        "T",
        "sequence length",
        str(kw.get("x", 16)),
        *map(str, y),
        kw.get("config", SMALL_GEGLU),
        gpu,
        kw.get("timestamp", "2025-01-02 03:04:05"),
        "0.8.4",
    ]


def csv_import(path, rows):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return liger_import(path=path)


SMALL_ROWS = [
    # Published with a p20–p80 of ±0.2%: narrow enough that a rerun can agree within ±2%.
    row("huggingface", "forward", y=(1.0, 0.998, 1.002)),
    row("liger", "forward", y=(0.8, 0.79, 0.81)),
    # Published with a p20–p80 of ±3.3%: wider than the tolerance, so no rerun can agree with it.
    row("huggingface", "full", y=(3.0, 2.9, 3.1)),
    # A CPU run recorded at a value no CPU reaches for this workload: its rerun diverges.
    row("huggingface", "forward", gpu="cpu", y=(1e-06, 1e-06, 1e-06), x=32),
    # A CPU run whose workload the upstream setup cannot build: its rerun fails.
    row("huggingface", "forward", gpu="cpu", y=(1.0, 1.0, 1.0), x=8, config=BROKEN_GEGLU),
]


@pytest.fixture
def small_data(tmp_path, db):
    csv_import(tmp_path / "small.csv", SMALL_ROWS)
    return BenchmarkRun.objects.select_related("implementation", "environment", "workload")


@pytest.fixture
def h200_run(small_data):
    return small_data.get(
        implementation__provider="huggingface", operation_mode="forward", environment__slug="nvidia-h200"
    )


@pytest.fixture
def far_off_cpu_run(small_data):
    return small_data.get(environment__slug="cpu", workload__parameters__T=32)


@pytest.fixture
def broken_cpu_run(small_data):
    return small_data.get(environment__slug="cpu", workload__parameters__T=8)


def geglu_measure_job(provider: str, mode: str, metric: str, **fields) -> RerunJob:
    """The one measure job an H200 request for geglu's `provider`, pass and metric queues."""
    from registry.reruns.services import measure_request

    return measure_request(
        kernel=Kernel.objects.get(slug="geglu"),
        providers=[provider],
        operation_modes=[mode],
        metrics=[metric],
        gpu_slug="nvidia-h200",
        **fields,
    ).created[0]


def spread_samples(median: float, *, spread: float = 0.006, count: int = 41) -> list[float]:
    """`count` samples evenly from median·(1 − spread) to median·(1 + spread), median in the middle:
    as KernelIndex's loop gives them for a steady op (its 95% interval of the median is tight)."""
    return [median * (1 + spread * (2 * i / (count - 1) - 1)) for i in range(count)]


def harness_result(
    median,
    *,
    p20=None,
    p80=None,
    samples=None,
    upstream=None,
    gpu_slug="nvidia-h200",
    gpu_uuid=None,
    unit="ms",
    **extra,
):
    """A result in the shape `registry.reruns.harness.run_job_spec` returns. median, p20 and p80
    are KernelIndex's protocol figures (of `samples`, by default 41 within ±0.6%); `upstream` is
    upstream do_bench's own figure for the same call, what a source run is judged on (by default
    the same median, p20 and p80)."""
    samples = samples if samples is not None else spread_samples(median)
    _, sample_p20, sample_p80 = stats.quantiles(samples) if len(samples) >= 2 else (median, median, median)
    p20 = p20 if p20 is not None else sample_p20
    p80 = p80 if p80 is not None else sample_p80
    on_gpu = gpu_slug != "cpu"
    nvml = {
        "sm_clock_mhz": 1980,
        "memory_clock_mhz": 3201,
        "temperature_c": 41,
        "power_w": 312.5,
        "reasons": [],
    }
    return {
        "status": "ok",
        "median": median,
        "p20": p20,
        "p80": p80,
        "unit": unit,
        "samples": samples,
        "upstream": upstream if upstream is not None else {"median": median, "p20": p20, "p80": p80},
        "gpu_uuid": (gpu_uuid if gpu_uuid is not None else "GPU-5e1f0c2a-0000-4000-8000-000000000001")
        if on_gpu
        else "",
        "gpu_state": {"before": nvml, "after": nvml, "throttled": []} if on_gpu else {},
        "sampling": {
            "protocol": "kernelindex-cuda-v1" if on_gpu else "kernelindex-cpu-v1",
            "stop": "precision",
            "precision": 0.004,
            "target_precision": 0.005,
            "confidence": 0.99,
            "warmup_calls": 3,
            "warmup_s": 0.03,
            "timing_s": 0.4,
            "setup_s": 0.2,
            "upstream_s": 0.1,
            "process_start_s": 0.0,
        },
        "environment": {
            "gpu_name": "NVIDIA H200" if on_gpu else "",
            "gpu_slug": gpu_slug,
            "driver": "580.65",
            "cuda": "13.0",
            "torch": "2.11.0",
            "triton": "3.6.0",
            "liger_kernel": "0.8.5",
            "transformers": "4.57.1",
        },
        "protocol": {"name": "kernelindex-cuda-v1" if on_gpu else "kernelindex-cpu-v1"},
        "log": "ran\n",
        "error": "",
        **extra,
    }


TEST_WORKER = "test-worker"


def worker_key_for_tests(*, gpu_slug: str = "cpu", cards=(), name: str = TEST_WORKER):
    """Register the key the test process and its Celery workers sign with (tests/settings.py)."""
    from registry.reruns.models import WorkerKey
    from registry.reruns.services import signing, worker_key_register

    public = signing.public_key_text(signing.worker_private_key())
    WorkerKey.objects.filter(public_key=public).delete()
    return worker_key_register(name=name, gpu_slug=gpu_slug, public_key=public, cards=list(cards))


@pytest.fixture(autouse=True)
def worker_key_registered(request):
    """Every test with a database has the test worker's key registered for CPU jobs."""
    marker = request.node.get_closest_marker("django_db")
    if marker is not None:
        request.getfixturevalue("transactional_db" if marker.kwargs.get("transaction") else "db")
        worker_key_for_tests()


def h200_measured(h200_run, result: dict):
    """A measure job of the H200 run's target (huggingface GeGLU forward latency), claimed by a
    worker and recorded with `result` (harness_result); the finished job."""
    from registry.reruns.models import JobState
    from registry.reruns.services import job_claim, measure_request, rerun_record_result

    job = measure_request(
        kernel=Kernel.objects.get(slug="geglu"),
        providers=["huggingface"],
        operation_modes=["forward"],
        metrics=["latency"],
        workloads=[h200_run.workload],
        gpu_slug="nvidia-h200",
    ).created[0]
    claim = job_claim(job_id=job.pk, gpu_slug="nvidia-h200", worker_host="gpu-host-1")
    finished = rerun_record_result(job_id=job.pk, lease=claim.lease, result=result)
    assert finished.state == JobState.SUCCEEDED
    return finished
