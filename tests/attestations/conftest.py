"""The reference record with its comparison group (plus a memory run) imported through the real
importer from a four-row slice of the bundled file, and submissions filed as the forms file them.
The roles are tests/conftest.py's."""

import pytest
from django.core.cache import cache

from attestations import services
from kernelindex.celery import app as celery_app
from registry.models import BenchmarkRun
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import
from tests.browser.conftest import browser  # noqa: F401 (the browser tests here use the one Chromium fixture)

REFERENCE_ID = (
    "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
    "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
)


def reference_slice() -> str:
    """The bundled file's header and the geglu seq-8192 backward-speed and full-memory rows on A100."""
    lines = BUNDLED_LIGER_CSV.read_text().splitlines()
    keep = [
        line
        for line in lines[1:]
        if line.startswith("geglu,")
        and ",sequence length,8192," in line
        and "A100-SXM4-80GB" in line
        and (",backward,speed," in line or ",full,memory," in line)
    ]
    assert len(keep) == 4
    return "\n".join([lines[0], *keep]) + "\n"


@pytest.fixture(autouse=True)
def clean_cache():
    """Rate-limit counters live in the cache; every test starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def eager_celery():
    """Tasks sent on commit run in-process, so their emails land in mail.outbox."""
    previous = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def liger_csv(tmp_path):
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text(reference_slice())
    return path


@pytest.fixture
def runs(db, liger_csv):
    liger_import(path=liger_csv)
    return {
        "reference": BenchmarkRun.objects.public().get(external_id=REFERENCE_ID),
        "memory": BenchmarkRun.objects.public().get(metric="memory", implementation__provider="huggingface"),
    }


@pytest.fixture
def run(runs):
    return runs["reference"]


REPRODUCTION = {
    "kind": "reproduction",
    "median": "145.0",
    "p20": "144.1",
    "p80": "146.3",
    "unit": "ms",
    "gpu_product": "NVIDIA A100 SXM4 80GB",
    "driver_version": "550.54.15",
    "cuda_version": "12.4",
    "torch_version": "2.4.0",
    "triton_version": "3.0.0",
    "liger_version": "0.2.1",
    "harness": "python benchmark/scripts/benchmark_geglu.py",
    "links": "https://example.org/log.txt",
    "text": "Ran it twice; the numbers held.",
}


@pytest.fixture
def reproduction_data():
    return dict(REPRODUCTION)


def submit_reproduction(run, author, **overrides):
    """A pending reproduction filed through the service, as the form would file it."""
    fields = {
        "kind": "reproduction",
        "median": 145.0,
        "p20": 144.1,
        "p80": 146.3,
        "unit": "ms",
        "gpu_product": "NVIDIA A100 SXM4 80GB",
        "text": "",
    }
    fields.update(overrides)
    return services.attestation_submit(run=run, author=author, **fields)


def submit_note(run, author, text="The backward pass includes one forward."):
    return services.attestation_submit(run=run, author=author, kind="note", text=text)
