"""No app function over 80 lines (registry/, attestations/, kernelindex/; tests, migrations,
scripts and bench aside). One not yet split would be listed (none is now), and the list is kept
exact: a new long function fails, and so does a listed one that got short (take it off the list)."""

import ast

from tests.architecture.imports import app_modules

LIMIT = 80
NOT_YET_SPLIT: set[tuple[str, str]] = set()


def long_functions(modules) -> dict[tuple[str, str], int]:
    found = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > LIMIT:
                    found[(name, node.name)] = length
    return found


def test_no_app_function_is_over_80_lines_but_the_listed_ones():
    found = long_functions(app_modules())
    assert {key: n for key, n in found.items() if key not in NOT_YET_SPLIT} == {}
    assert NOT_YET_SPLIT - set(found) == set()


def test_a_long_function_is_found(tmp_path):
    package = tmp_path / "planted"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (package / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    found = long_functions(app_modules(tmp_path, packages=("planted",)))
    assert found == {("planted.long", "long"): LIMIT + 1}
