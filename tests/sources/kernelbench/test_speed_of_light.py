"""Speed of light for level-1 problems whose least bytes and FLOPs follow from their shapes."""

import pytest

from registry.models import BenchmarkRun
from registry.sources.kernelbench.services import kernelbench_import
from tests.sources.kernelbench.conftest import MATMUL, RELU, row, write_folder

pytestmark = pytest.mark.django_db
CONV = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)
    def forward(self, x):
        return self.conv(x)
batch_size = 16
def get_inputs():
    return [torch.rand(batch_size, 3, 256, 256)]
def get_init_inputs():
    return [3, 64, 3]
"""
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def runs(tmp_path):
    problems = {
        ("level1", "1_Square_matrix_multiplication_.py"): MATMUL,
        ("level1", "19_ReLU.py"): RELU,
        ("level1", "50_conv_standard_2D__square_input__square_kernel.py"): CONV,
        ("level2", "19_ReLU.py"): RELU,
    }
    rows = {
        "level1": {
            "1_Square_matrix_multiplication_.py": row(2.0, H100),
            "19_ReLU.py": row(0.0001, H100),  # faster than moving its bytes allows
            "50_conv_standard_2D__square_input__square_kernel.py": row(1.0, H100),
        },
        "level2": {"19_ReLU.py": row(1.0, H100)},
    }
    version = {
        "subject": "h100",
        "date": "2025-01-21T00:40:46-08:00",
        "files": {"results/timing/H100/baseline_time_torch.json": rows},
        "problems": problems,
    }
    kernelbench_import(path=write_folder(tmp_path / "kb", [version]))
    return BenchmarkRun.objects.filter(source__slug="kernelbench")


def test_a_matmul_is_counted_from_its_shapes(runs):
    run = runs.get(kernel__slug__startswith="kernelbench-l1-1-")
    sol = run.speed_of_light
    n = 4096
    assert sol["countable"] and sol["flops"] == 2 * n**3 and sol["bytes"] == 3 * n * n * 4
    sheet = sol["ceilings"][0]
    assert sheet["kind"] == "datasheet" and sheet["bound"] == "compute"
    assert run.sol_percent == pytest.approx(100 * 1e3 * 2 * n**3 / (sheet["tflops"] * 1e12) / 2.0, rel=1e-6)


def test_an_elementwise_op_faster_than_its_bytes_allow_is_implausible(runs):
    run = runs.get(kernel__slug__startswith="kernelbench-l1-19-")
    assert run.speed_of_light["bytes"] == 2 * 16 * 16384 * 4
    assert run.implausible and run.sol_percent > 100


def test_a_convolution_and_a_level_2_problem_are_not_counted(runs):
    conv = runs.get(kernel__slug__startswith="kernelbench-l1-50-")
    fused = runs.get(kernel__slug__startswith="kernelbench-l2-19-")
    assert conv.sol_percent is None and "not counted" in conv.speed_of_light["reason"]
    assert fused.sol_percent is None and "only level-1" in fused.speed_of_light["reason"]
