"""Fixtures for the public site and API: a small registry written as a Liger CSV and imported
through the real importer, at whatever size a test asks for."""

import csv
import json

import pytest
from django.core.cache import cache

from registry.sources.liger.importer import COLUMNS
from registry.sources.liger.services import bundled_data_load, liger_import

GPUS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"]
CONFIG = {"bsz": 8, "hidden_size": 4096, "intermediate_size": 1376, "hidden_act": "gelu_pytorch_tanh"}


def liger_rows(
    *,
    kernels=("geglu",),
    providers=("liger", "huggingface"),
    gpus=1,
    xs=(1024, 2048),
    modes=("forward", "backward"),
):
    """Rows shaped like the bundled file: every combination, with distinct medians."""
    rows = []
    for kernel in kernels:
        for g, gpu in enumerate(GPUS[:gpus]):
            for mode in modes:
                for p, provider in enumerate(providers):
                    for x in xs:
                        median = x / 100 + p + g * 0.5 + (mode == "backward")
                        rows.append(
                            {
                                "kernel_name": kernel,
                                "kernel_provider": provider,
                                "kernel_operation_mode": mode,
                                "metric_name": "speed",
                                "metric_unit": "ms",
                                "x_name": "T",
                                "x_label": "sequence length",
                                "x_value": x,
                                "y_value_50": median,
                                "y_value_20": median * 0.98,
                                "y_value_80": median * 1.02,
                                "extra_benchmark_config_str": json.dumps(
                                    {**CONFIG, "dtype": "torch.bfloat16"}
                                ),
                                "gpu_name": gpu,
                                "timestamp": "2024-09-03 15:38:42",
                                "liger_version": "0.2.1",
                            }
                        )
    return rows


@pytest.fixture
def import_rows(tmp_path):
    """Write rows to a CSV and import it with the real importer; returns the summary."""
    counter = {"n": 0}

    def write_and_import(rows):
        counter["n"] += 1
        path = tmp_path / f"bench-{counter['n']}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        return liger_import(path=path)

    return write_and_import


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    """The anonymous throttle counts requests in the cache; every test starts at zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="module")
def bundled(django_db_setup, django_db_blocker):
    """The 2,448 bundled runs, loaded once per module and removed after it."""
    with django_db_blocker.unblock():
        summaries = bundled_data_load()
    yield summaries
    with django_db_blocker.unblock():
        from django.core.management import call_command

        call_command("flush", "--noinput", verbosity=0)
