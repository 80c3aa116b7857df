"""How much of the bundled data the harness can run: every count here is quoted in the README."""

from collections import Counter, defaultdict

import pytest

from registry.reruns.harness import gpu_slug, local_gpu_slug
from registry.reruns.harness.spec import Refused, plan_for
from registry.importers import liger
from registry.services import BUNDLED_LIGER_CSV

TORCH_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


def bundled_specs():
    for row in liger.parse_file(BUNDLED_LIGER_CSV.read_bytes()):
        workload = row.workload
        config = dict(workload["parameters"])
        x_value = config.pop(workload["x_name"])
        if workload["dtype"]:
            config["dtype"] = TORCH_DTYPES[workload["dtype"]]
        yield {
            "kernel": row.kernel["slug"],
            "provider": row.implementation["provider"],
            "operation_mode": row.run["operation_mode"],
            "metric": row.run["metric"],
            "x_name": workload["x_name"],
            "x_value": x_value,
            "config": config,
            "device": "cuda",
        }


@pytest.fixture(scope="module")
def outcomes():
    counts = defaultdict(Counter)
    for spec in bundled_specs():
        try:
            plan_for(spec)
            counts[spec["kernel"]]["mapped"] += 1
        except Refused:
            counts[spec["kernel"]]["refused"] += 1
    return counts


class TestCoverageOfTheBundledData:
    def test_24_of_the_35_kernels_are_mapped(self, outcomes):
        mapped = {kernel for kernel, count in outcomes.items() if count["mapped"]}

        assert len(outcomes) == 35
        assert len(mapped) == 24

    def test_17_kernels_are_mapped_for_every_row(self, outcomes):
        whole = {kernel for kernel, count in outcomes.items() if not count["refused"]}

        assert len(whole) == 17
        assert {"geglu", "swiglu", "rms_norm", "rope", "fused_moe"} <= whole

    def test_1879_of_the_2448_rows_are_runnable_on_a_gpu(self, outcomes):
        assert sum(count["mapped"] for count in outcomes.values()) == 1879
        assert sum(count.total() for count in outcomes.values()) == 2448

    def test_every_geglu_row_maps_to_setup_geglu(self):
        plans = [plan_for(spec) for spec in bundled_specs() if spec["kernel"] == "geglu"]

        assert len(plans) == 48
        assert {plan["function"] for plan in plans} == {"setup_geglu"}
        assert {plan["x_value"] for plan in plans} == {1024, 2048, 4096, 8192}


class TestGpuSlugs:
    def test_this_machine_without_a_gpu_is_cpu(self):
        assert local_gpu_slug() == "cpu"

    def test_gpu_names_slug_like_the_importer(self):
        rows = liger.parse_file(BUNDLED_LIGER_CSV.read_bytes())
        slugs = {row.environment["spec"]["gpu"]["name"]: row.environment["slug"] for row in rows}

        assert gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
        assert all(gpu_slug(name) == slug for name, slug in slugs.items())
        assert gpu_slug("NVIDIA H200") == "nvidia-h200"
        assert gpu_slug("CPU") == "cpu"
