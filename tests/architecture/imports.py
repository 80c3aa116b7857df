"""The import graph of the app code, read from the source with `ast` (nothing is imported): which
module imports which, for the architecture tests. A module is named by its dotted path; an import
of a package's name (`from registry.reruns import services`) counts as importing the submodule
when one exists, else the package."""

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP_PACKAGES = ("registry", "attestations", "kernelindex")
SKIPPED_PARTS = {"migrations", "tests", "__pycache__"}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    top_level: bool  # at module level, not inside a function (a deliberate late import)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def app_modules(root: Path = ROOT, packages=APP_PACKAGES) -> dict[str, Path]:
    """Every module of the app packages, migrations aside."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if SKIPPED_PARTS.isdisjoint(path.relative_to(root).parts):
                modules[module_name(path, root)] = path
    return modules


def _targets(node, importer: str, is_package: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = importer.split(".") if is_package else importer.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    names = [f"{base}.{alias.name}" for alias in node.names]
    return [name if name in known else base for name in names]


def imports_of(modules: dict[str, Path]) -> list[Import]:
    """Each import of one app module by another, with its line and whether it runs on import."""
    known = set(modules)
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        in_function = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function.update(id(child) for child in ast.walk(node) if child is not node)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, name, path.name == "__init__.py", known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append(Import(name, target, node.lineno, id(node) not in in_function))
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing
    itself): each is at least one import cycle. Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges.get(node, ()):
                        found.append(sorted(component))
    return found


def graph(found: list[Import], *, top_level_only: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for imp in found:
        if imp.top_level or not top_level_only:
            edges.setdefault(imp.importer, set()).add(imp.imported)
    return edges
