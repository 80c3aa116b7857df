"""What a KernelBench problem file says about its workload, read from its syntax tree.

A problem file is code (a reference `Model`, `get_inputs()`, `get_init_inputs()`), and the web
process never runs it: module-level constants are evaluated from literals, names already read and
arithmetic only; the input shapes are read from `torch.rand*` calls in `get_inputs()` whose
arguments evaluate the same way. Anything else is left out, never guessed. No Django here.
"""

import ast
import operator
import re

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FACTORIES = {"rand", "randn", "ones", "zeros", "empty", "randint", "rand_like"}
_DTYPES = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int64": "int64",
    "long": "int64",
    "int32": "int32",
    "bool": "bool",
}
MAX_NUMBER = 2**62  # an exponent that would build a huge integer is not evaluated
NAME = re.compile(r"^(?P<number>\d+)_(?P<name>.+)\.py$")


class Unreadable(Exception):
    """An expression that is not a plain literal computation."""


def title_of(file: str) -> tuple[int | None, str]:
    """(problem number, words) from `19_ReLU.py` → (19, "ReLU"); underscores become spaces."""
    match = NAME.match(file)
    if not match:
        return None, file.removesuffix(".py").replace("_", " ").strip()
    return int(match["number"]), match["name"].replace("_", " ").strip()


def evaluate(node: ast.AST, names: dict):
    """The value of a literal expression over `names`; Unreadable for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise Unreadable(node.id)
    if isinstance(node, ast.Tuple | ast.List):
        items = []
        for item in node.elts:
            if isinstance(item, ast.Starred):
                spread = evaluate(item.value, names)
                if not isinstance(spread, list):
                    raise Unreadable("a starred non-sequence")
                items.extend(spread)
            else:
                items.append(evaluate(item, names))
        return items
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_number(evaluate(node.operand, names)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _number(evaluate(node.left, names)), _number(evaluate(node.right, names))
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > MAX_NUMBER):
            raise Unreadable("a power too large")
        try:
            value = _BINARY[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError):
            raise Unreadable("arithmetic error") from None
        return _number(value)
    raise Unreadable(type(node).__name__)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > MAX_NUMBER:
        raise Unreadable("not a number")
    return value


def constants(tree: ast.Module) -> dict:
    """Module-level `NAME = literal` (and `a = b = literal`) assignments, in file order."""
    names: dict = {}
    for statement in tree.body:
        if not isinstance(statement, ast.Assign):
            continue
        try:
            value = evaluate(statement.value, names)
        except Unreadable:
            continue
        for target in statement.targets:
            _bind(target, value, names)
    return names


def _bind(target, value, names: dict) -> None:
    """`a = v`, and `a, b = v1, v2` where the lengths agree."""
    if isinstance(target, ast.Name):
        names[target.id] = value
    elif (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, list)
        and len(value) == len(target.elts)
    ):
        for element, item in zip(target.elts, value, strict=True):
            _bind(element, item, names)


def input_tensors(tree: ast.Module, names: dict) -> list[dict]:
    """The tensors `get_inputs()` builds with torch factories whose shapes read as literals."""
    function = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "get_inputs"), None)
    if function is None:
        return []
    local = dict(names)
    tensors = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and not _is_factory(node.value):
            try:
                value = evaluate(node.value, local)
            except Unreadable:
                continue
            for target in node.targets:
                _bind(target, value, local)
    for node in ast.walk(function):
        if _is_factory(node):
            shape = _shape(node, local)
            if shape is not None:
                tensors.append({"name": f"input{len(tensors)}", "dtype": _dtype(node), "shape": shape})
    return tensors


def _is_factory(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
        and node.func.attr in _FACTORIES
    )


def _shape(call: ast.Call, names: dict) -> list[int] | None:
    args = call.args[2:] if call.func.attr == "randint" else call.args
    size = next((k.value for k in call.keywords if k.arg == "size"), None)
    try:
        if size is not None:
            shape = evaluate(size, names)
        elif len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List | ast.Name):
            shape = evaluate(args[0], names)
        else:
            shape = evaluate(ast.Tuple(elts=list(args), ctx=ast.Load()), names)
    except Unreadable:
        return None
    shape = shape if isinstance(shape, list) else [shape]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return None
    return shape


def _dtype(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "dtype" and isinstance(keyword.value, ast.Attribute):
            return _DTYPES.get(keyword.value.attr, keyword.value.attr)
    return "int64" if call.func.attr == "randint" else "fp32"


def read(text: str) -> dict:
    """{"constants": {...}, "tensors": [...]} of a problem file; a file that does not parse
    gives both empty and `error` set (the page shows its text all the same)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        return {"constants": {}, "tensors": [], "error": f"does not parse: {exc}"}
    names = constants(tree)
    return {"constants": names, "tensors": input_tensors(tree, names)}
