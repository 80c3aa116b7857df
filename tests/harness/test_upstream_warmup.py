"""Upstream's own warm-up before a job's setup: benchmark_fused_moe.py's `__main__` runs
`_warmup_liger` at the model's base T before its sweep, so that Triton's autotuner (keyed on H and
intermediate_dim) picks the config every point then uses. The harness runs it before each liger
fused_moe job; the liger provider cannot run on a CPU, so the call itself is checked against the
real script's source and on a stand-in of its module."""

import ast
from types import SimpleNamespace

import pytest
import torch

from registry.reruns.harness.spec import plan_for
from tests.harness.test_timing_loop import harness_runner


def fused_moe_spec(provider, sweep_dim="T"):
    config = {"H": 2048, "intermediate_dim": 768, "K": 8, "dtype": "torch.bfloat16", "sweep_dim": sweep_dim}
    config |= {"E": 128, "T": None} if sweep_dim == "T" else {"E": None, "T": 8192}
    return {
        "kernel": "fused_moe",
        "provider": provider,
        "operation_mode": "full",
        "metric": "latency",
        "x_name": sweep_dim,
        "x_value": 512 if sweep_dim == "T" else 32,
        "config": config,
        "device": "cuda",
    }


def test_only_liger_fused_moe_plans_ask_for_upstreams_warmup():
    assert plan_for(fused_moe_spec("liger"))["warmup"] == "fused_moe_autotune"
    assert plan_for(fused_moe_spec("huggingface"))["warmup"] == ""


class UpstreamModule(SimpleNamespace):
    """The names of benchmark_fused_moe.py that the warm-up reads, with `_warmup_liger` recorded."""

    def __init__(self):
        super().__init__(
            QWEN3_MOE_30B=SimpleNamespace(T=8192), EXPERT_SWEEP_VALUES=[8, 16, 32, 64, 128], calls=[]
        )
        self._warmup_liger = lambda *args: self.calls.append(args)


@pytest.mark.parametrize(
    ("sweep_dim", "experts", "ran"),
    [
        ("T", [128], "_warmup_liger at T=8192, E=128"),
        ("E", [8, 16, 32, 64, 128], "_warmup_liger at T=8192, E=8,16,32,64,128"),
    ],
)
def test_the_warmup_runs_at_the_models_base_t_as_upstreams_main_does(sweep_dim, experts, ran):
    runner = harness_runner()
    module = UpstreamModule()
    config = {**plan_for(fused_moe_spec("liger", sweep_dim))["config"], "dtype": torch.bfloat16}

    assert runner.upstream_warmup(module, "fused_moe_autotune", config) == ran
    assert module.calls == [(8192, e, 2048, 768, 8, torch.bfloat16, sweep_dim) for e in experts]
    assert runner.upstream_warmup(module, "", config) == "" and len(module.calls) == len(experts)


def test_the_real_script_warms_up_so_before_its_sweep(harness_root):
    scripts = harness_root / "benchmark" / "scripts"
    tree = ast.parse((scripts / "benchmark_fused_moe.py").read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert [arg.arg for arg in functions["_warmup_liger"].args.args] == [
        "T",
        "E",
        "H",
        "intermediate_dim",
        "K",
        "dtype",
        "sweep_dim",
    ]
    main = next(
        node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
    )
    warmups = [
        ast.unparse(node)
        for node in ast.walk(main)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "_warmup_liger"
    ]
    assert warmups == [
        "_warmup_liger(probe_T, E, H, intermediate_dim, K, dtype, sweep_dim='T')",
        "_warmup_liger(probe_T, e_val, H, intermediate_dim, K, dtype, sweep_dim='E')",
    ]
    assert "probe_T = moe_cfg.T" in ast.unparse(main) and "moe_cfg = QWEN3_MOE_30B" in ast.unparse(main)
    assert "EXPERT_SWEEP_VALUES = [8, 16, 32, 64, 128]" in ast.unparse(tree)
    configs = ast.unparse(ast.parse((scripts / "benchmark_model_configs.py").read_text()))
    assert "QWEN3_MOE_30B = MoEModelConfig(name='qwen3_moe_30b', T=8192, E=128, H=2048" in configs
