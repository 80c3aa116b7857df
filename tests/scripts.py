"""The project's scripts (scripts/*.py) as modules, for the tests that check what they compute,
print or write: they are files run by path, not a package, so each is loaded from its file."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py, loaded afresh (a test that changes its globals changes no other's)."""
    spec = importlib.util.spec_from_file_location(
        f"kernelindex_script_{name}", ROOT / "scripts" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
