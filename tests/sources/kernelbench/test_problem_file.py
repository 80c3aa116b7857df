"""Constants and input shapes are read from a problem file's syntax tree; the file never runs."""

import pytest

from registry.sources.kernelbench import problem
from registry.sources.kernelbench.history import versions
from registry.sources.kernelbench.services import BUNDLED
from tests.sources.kernelbench.conftest import MATMUL

CONV = """import torch
batch_size = 128
in_channels  = 64
height = width = 128
bias_shape = (in_channels, 1, 1)
scale = 2.0 ** -1

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width), torch.randint(0, 10, (batch_size,))]
"""


def test_constants_and_shapes_of_a_matmul():
    read = problem.read(MATMUL)
    assert read["constants"] == {"N": 4096}
    assert read["tensors"] == [
        {"name": "input0", "dtype": "fp32", "shape": [4096, 4096]},
        {"name": "input1", "dtype": "fp32", "shape": [4096, 4096]},
    ]


def test_chained_assignments_tuples_and_randint_sizes():
    read = problem.read(CONV)
    assert read["constants"]["height"] == read["constants"]["width"] == 128
    assert read["constants"]["bias_shape"] == [64, 1, 1]
    assert read["constants"]["scale"] == 0.5
    assert [t["shape"] for t in read["tensors"]] == [[128, 64, 128, 128], [128]]
    assert read["tensors"][1]["dtype"] == "int64"


def test_a_hostile_file_is_read_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    text = f"""import os
open({str(marker)!r}, "w").write("x")
N = len(os.listdir("/"))
M = 10 ** 10 ** 10
K = 4
def get_inputs():
    return [torch.rand(K, N), torch.rand(K)]
"""
    read = problem.read(text)
    assert not marker.exists()
    assert read["constants"] == {"K": 4}  # N calls a function, M is a power too large: left out
    assert read["tensors"] == [{"name": "input0", "dtype": "fp32", "shape": [4]}]


def test_a_file_that_does_not_parse_gives_nothing_and_says_so():
    read = problem.read("def (:\n")
    assert read["constants"] == {} and read["tensors"] == [] and "does not parse" in read["error"]


def test_titles():
    assert problem.title_of("19_ReLU.py") == (19, "ReLU")
    assert problem.title_of("1_Square_matrix_multiplication_.py") == (1, "Square matrix multiplication")


@pytest.mark.parametrize("level", ["level1"])
def test_most_shipped_level_1_problems_have_their_shapes_read(level):
    newest = versions(BUNDLED)[-1]
    files = [(key, blob) for key, blob in newest.problems.items() if key[0] == level]
    read = [problem.read(newest.problem_text(blob)) for _, blob in files]
    with_shapes = sum(1 for r in read if r["tensors"])
    assert len(files) == 100
    assert with_shapes >= 98, with_shapes


def test_tuple_unpacking_and_starred_shapes():
    text = "D, H, W = 24, 32, 32\ninput_shape = (4000,)\ndef get_inputs():\n    return [torch.rand(2, *input_shape), torch.rand(1, D, H, W)]\n"
    read = problem.read(text)
    assert read["constants"] == {"D": 24, "H": 32, "W": 32, "input_shape": [4000]}
    assert [t["shape"] for t in read["tensors"]] == [[2, 4000], [1, 24, 32, 32]]
