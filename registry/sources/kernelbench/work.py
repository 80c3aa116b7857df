"""The least bytes and FLOPs of a KernelBench level-1 problem, from its input shapes alone.

Counted where they follow from the shapes read from the problem file's syntax tree: matrix
multiplications (2·M·K·N FLOPs; A, B and C moved once), elementwise activations (each element read
and written once), reductions and losses over their input (read once; one FLOP per element) and
normalisations (read and written once; five FLOPs per element). Every figure is a lower bound, as a
speed of light must be. Convolutions, pooling, scans, attention and the rest say "not counted".
No Django here.
"""

import math
import re

BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int64": 8, "int32": 4, "bool": 1}
ELEMENTWISE = re.compile(
    r"(relu|sigmoid|tanh|softmax|logsoftmax|swish|gelu|selu|hardsigmoid|softplus|softsign|elu|hardtanh|"
    r"leakyrelu|newgelu)$"
)
REDUCTION = re.compile(
    r"(sum|mean|max|min|argmax|argmin|product)_reduction|(argmax|argmin)_over_a_dimension|"
    r"(frobenius|l1|l2)_?norm_?$|"
    r"(hingeloss|mseloss|huberloss|kldivloss|crossentropyloss|cosinesimilarityloss|"
    r"tripletmarginloss|smooth_l1_loss|huber_loss)$"
)
NORMALISATION = re.compile(r"(layernorm|batchnorm|instancenorm|groupnorm|rmsnorm)_?$")
MATMUL = re.compile(r"matmul|matrix_multiplication|matrix_vector|matrix_scalar")
NOT_COUNTED = "KernelBench's level-1 {kind} work does not follow from the input shapes alone: not counted"


def _name(workload) -> str:
    file = workload.spec.get("problem", {}).get("file") or ""
    return re.sub(r"^\d+_", "", file.removesuffix(".py")).lower().strip("_")


def count(workload, operation_mode: str, *, kernel: str = "") -> dict | None:
    """{bytes, flops, live_bytes, dtype}, {reason}, or None for a workload not KernelBench's (known
    by its problem file, whatever the kernel's slug)."""
    problem = workload.spec.get("problem") if isinstance(workload.spec, dict) else None
    if not problem:
        return None
    if problem.get("level") != "level1":
        return {"reason": "only level-1 KernelBench problems are counted: the others fuse many operations"}
    tensors = [t for t in workload.tensors if t.get("dtype") in BYTES]
    if not tensors or len(tensors) != len(workload.tensors):
        return {"reason": "the input shapes could not be read from the problem file: not counted"}
    name, size = _name(workload), BYTES[tensors[0]["dtype"]]
    elements = [math.prod(t["shape"]) for t in tensors]
    live = sum(e * BYTES[t["dtype"]] for e, t in zip(elements, tensors, strict=True))
    if "triangular" in name:  # a triangular product needs a third of the dense FLOPs, or fewer
        return {"reason": NOT_COUNTED.format(kind="triangular product's")}
    if MATMUL.search(name):
        found = _matmul(name, [t["shape"] for t in tensors], workload.parameters)
        if found is None:
            return {"reason": NOT_COUNTED.format(kind="matrix multiplication (its operand layout)")}
        out_elements, flops = found
        return _work(live + out_elements * size, flops, live)
    if ELEMENTWISE.search(name) and len(tensors) == 1:
        return _work(2 * live, elements[0], live)
    if NORMALISATION.search(name) and len(tensors) == 1:
        return _work(2 * live, 5 * elements[0], live)
    if REDUCTION.search(name):
        return _work(live, sum(elements), live)
    return {"reason": NOT_COUNTED.format(kind="operation's")}


def _work(bytes_: int, flops: int, live: int) -> dict:
    return {"bytes": int(bytes_), "flops": int(flops), "live_bytes": int(live), "dtype": "fp32"}


def _matmul(name: str, shapes: list, parameters: dict) -> tuple[int, int] | None:
    """(output elements, FLOPs) of a product whose operands' layout the shapes settle."""
    if "scalar" in name and len(shapes) >= 1:
        return math.prod(shapes[0]), math.prod(shapes[0])
    if len(shapes) != 2:
        return None
    a, b = shapes
    if "diag" in name and len(a) == 1 and len(b) == 2:  # diag(A) @ B: one multiply per element
        return math.prod(b), math.prod(b)
    batch = 1
    if len(a) == 3 and len(b) == 3 and a[0] == b[0]:
        batch, a, b = a[0], a[1:], b[1:]
    elif len(a) >= 3 and len(b) == 2:  # a tensor times a matrix: its leading dims are rows
        a = [math.prod(a[:-1]), a[-1]]
    if len(a) != 2 or len(b) != 2:
        return None
    counts = set()
    # The plain layout unless the problem's name says an operand is transposed.
    flips = (False, True) if "transpos" in name else (False,)
    for ta in flips:
        for tb in flips:
            a2, b2 = (a[1], a[0]) if ta else (a[0], a[1]), (b[1], b[0]) if tb else (b[0], b[1])
            if a2[1] == b2[0]:  # (M, K) @ (K, N), either operand perhaps transposed
                m, k, n = a2[0], a2[1], b2[1]
                counts.add((batch * m * n, 2 * batch * m * k * n))
    # Square operands fit every layout with the same count; two different counts are ambiguous.
    return counts.pop() if len(counts) == 1 else None
