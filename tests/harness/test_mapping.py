"""How much of the bundled data the harness can run: every count here is quoted in docs/gpu-hosts.md
and docs/reruns.md, checked below."""

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from registry.reruns.harness import gpu_slug, local_gpu_slug, refusal_reasons
from registry.reruns.harness.spec import Refused, plan_for
from registry.sources.liger import importer as liger
from registry.sources.liger.services import BUNDLED_LIGER_CSV

ROOT = Path(__file__).resolve().parents[2]
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


def distinct_workloads() -> tuple[set, set]:
    """A workload: kernel, provider, pass, metric, x value and configuration, on any GPU; those the
    harness maps, and all."""
    mapped, every = set(), set()
    for spec in bundled_specs():
        key = (
            spec["kernel"],
            spec["provider"],
            spec["operation_mode"],
            spec["metric"],
            spec["x_value"],
            json.dumps(spec["config"], sort_keys=True),
        )
        every.add(key)
        try:
            plan_for(spec)
            mapped.add(key)
        except Refused:
            pass
    return mapped, every


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
    def test_34_of_the_35_kernels_are_mapped(self, outcomes):
        mapped = {kernel for kernel, count in outcomes.items() if count["mapped"]}

        assert len(outcomes) == 35
        assert len(mapped) == 34
        assert set(outcomes) - mapped == {"fused_linear_simpo_loss"}

    def test_25_kernels_are_mapped_for_every_row(self, outcomes):
        whole = {kernel for kernel, count in outcomes.items() if not count["refused"]}

        assert len(whole) == 25
        assert {"geglu", "swiglu", "rms_norm", "rope", "fused_moe"} <= whole

    def test_2145_of_the_2448_rows_are_runnable_on_a_gpu(self, outcomes):
        assert sum(count["mapped"] for count in outcomes.values()) == 2145
        assert sum(count.total() for count in outcomes.values()) == 2448

    def test_1906_distinct_workloads_are_runnable_on_a_gpu(self):
        mapped, every = distinct_workloads()

        assert (len(mapped), len(every)) == (1906, 2194)

    def test_every_geglu_row_maps_to_setup_geglu(self):
        plans = [plan_for(spec) for spec in bundled_specs() if spec["kernel"] == "geglu"]

        assert len(plans) == 48
        assert {plan["function"] for plan in plans} == {"setup_geglu"}
        assert {plan["x_value"] for plan in plans} == {1024, 2048, 4096, 8192}


# The fused-linear and chunked losses and megatron_cross_entropy (issue 12, part 3): rows mapped
# and refused, by kernel, and the one reason each refused row is given.
LOSSES = {
    "fused_linear_cross_entropy": (24, 0),
    "fused_linear_jsd": (24, 0),
    "fused_linear_orpo_loss": (48, 0),
    "fused_linear_cpo_loss": (24, 0),
    "fused_linear_simpo_loss": (0, 24),
    "fused_linear_grpo_loss_token": (32, 0),
    "fused_linear_grpo_loss_sequence": (32, 0),
    "kto_loss": (10, 20),
    "distill_jsd_loss": (24, 0),
    "distill_cosine_loss": (24, 0),
    "megatron_cross_entropy": (24, 48),
}


class TestTheLossesAndMegatronCrossEntropy:
    def test_rows_mapped_and_refused_by_kernel(self, outcomes):
        counts = {kernel: (outcomes[kernel]["mapped"], outcomes[kernel]["refused"]) for kernel in LOSSES}

        assert counts == LOSSES

    def test_every_refused_row_is_given_a_reason_stated_in_the_table(self):
        stated = refusal_reasons()
        for spec in bundled_specs():
            if spec["kernel"] not in LOSSES:
                continue
            try:
                plan_for(spec)
            except Refused as exc:
                assert any(reason in str(exc) for reason in stated[spec["kernel"]]), (spec, str(exc))

    def test_what_stays_refused_and_why(self):
        reasons = {}
        for spec in bundled_specs():
            if spec["kernel"] in LOSSES:
                try:
                    plan_for(spec)
                except Refused as exc:
                    key = (spec["kernel"], spec["provider"], spec["metric"], spec["operation_mode"])
                    reasons[key] = str(exc)

        simpo = {key: why for key, why in reasons.items() if key[0] == "fused_linear_simpo_loss"}
        assert {key[1] for key in simpo} == {"liger", "huggingface"}
        assert all("compute_nll_loss" in why and "loss_type 'sigmoid'" in why for why in simpo.values())
        kto = {key: why for key, why in reasons.items() if key[0] == "kto_loss"}
        assert {key[2] for key in kto} == {"latency"}
        assert all("use_ref_bias" in why for why in kto.values())
        megatron = {key for key in reasons if key[0] == "megatron_cross_entropy"}
        assert {key[1] for key in megatron} == {"megatron-fused", "megatron-unfused"}
        assert all("megatron-core" in reasons[key] for key in megatron)

    def test_old_h_and_v_become_hidden_size_and_vocab_size(self):
        plans = [plan_for(spec) for spec in bundled_specs() if spec["kernel"] == "fused_linear_orpo_loss"]

        assert {(p["script"], p["function"]) for p in plans} == {("benchmark_orpo_loss", "setup_orpo_loss")}
        assert {(p["config"]["T"], p["config"]["hidden_size"], p["config"]["vocab_size"]) for p in plans} == {
            (1024, 4096, 128256),
            (4096, 4096, 128256),
        }
        assert {p["x_value"] for p in plans} == {2, 4, 8, 16}

    def test_grpo_rows_map_by_their_importance_sampling_level(self):
        for level in ("token", "sequence"):
            plans = [
                plan_for(spec)
                for spec in bundled_specs()
                if spec["kernel"] == f"fused_linear_grpo_loss_{level}"
            ]
            assert {p["config"]["importance_sampling_level"] for p in plans} == {level}
            assert {p["operation_mode"] for p in plans} == {"forward", "backward", "full"}

    def test_megatron_cross_entropy_rows_run_on_one_rank_through_the_distributed_entry(self):
        plans = [
            plan_for(spec)
            for spec in bundled_specs()
            if spec["kernel"] == "megatron_cross_entropy" and spec["provider"] == "liger"
        ]

        assert len(plans) == 24
        assert {p["entry"] for p in plans} == {"distributed"}
        assert {p["world_size"] for p in plans} == {1}
        assert {p["function"] for p in plans} == {"_bench_speed_one", "_bench_memory_one"}
        assert {p["x_value"] for p in plans} == {2**i for i in range(12, 18)}

    def test_every_other_plan_runs_on_one_process(self):
        assert {plan_for(spec)["world_size"] for spec in bundled_specs() if spec["kernel"] == "geglu"} == {1}


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


class TestTheDocsQuoteTheseCounts:
    """docs/gpu-hosts.md and docs/reruns.md give the counts above as the bundled data gives them."""

    def test_the_coverage_sentences(self, outcomes):
        kernels = len(outcomes)
        mapped_kernels = sum(1 for count in outcomes.values() if count["mapped"])
        rows = sum(count.total() for count in outcomes.values())
        mapped_rows = sum(count["mapped"] for count in outcomes.values())
        mapped, every = distinct_workloads()
        gpu_hosts, reruns = (
            " ".join((ROOT / "docs" / name).read_text().split()) for name in ("gpu-hosts.md", "reruns.md")
        )
        assert (
            f"The harness maps {mapped_kernels} of the bundled data's {kernels} kernels ({mapped_rows:,} of "
            f"{rows:,} rows, {len(mapped):,} distinct workloads)" in gpu_hosts
        )
        assert (
            f"Of the bundled data's {kernels} kernels, {mapped_kernels} have rows the harness runs: "
            f"{mapped_rows:,} of {rows:,} rows, {len(mapped):,} of {len(every):,} distinct workloads"
            in reruns
        )

    def test_the_refused_rows_table(self, outcomes):
        """docs/reruns.md, "Kernels the harness cannot run, and why": each row's refused counts."""
        text = (ROOT / "docs" / "reruns.md").read_text()
        section = text[text.index("## Kernels the harness cannot run") :]
        table = [line for line in section.splitlines() if line.startswith("| `")]
        assert table
        for line in table:
            kernels_cell, refused_cell = line.split("|")[1:3]
            kernels = re.findall(r"`(\w+)`", kernels_cell)
            counts = [int(n) for n in re.findall(r"\d+", refused_cell)]
            if len(counts) == 1 and len(kernels) == 1:
                (kernel,) = kernels
                assert outcomes[kernel]["refused"] == counts[0], kernel
                if "all" in refused_cell:
                    assert outcomes[kernel]["mapped"] == 0, kernel
            else:
                assert [outcomes[kernel]["refused"] for kernel in kernels] == counts, kernels
