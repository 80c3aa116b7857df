"""docs/architecture.md matches the code: every path it names exists, and every dotted name it
gives (a module, or a module's attribute) can be found."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("registry", "attestations", "kernelindex")


def named() -> tuple[set[str], set[str]]:
    """(paths, dotted names) in backticks."""
    quoted = set(re.findall(r"`([^`\s]+)`", DOC.read_text()))
    paths = {q for q in quoted if "/" in q and q.split("/")[0] in PACKAGES + ("tests", "docs")}
    dotted = {q for q in quoted if "/" not in q and q.split(".")[0] in PACKAGES and "." in q}
    return paths, dotted


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            thing = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                thing = getattr(thing, attribute)
        except AttributeError:
            return False
        return True
    return False


def test_every_path_the_page_names_exists():
    paths, _ = named()
    assert len(paths) > 20
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_every_module_the_page_names_is_found():
    _, dotted = named()
    assert "registry.reruns.harness.timing.DEFAULT_SETTINGS" in dotted
    assert sorted(d for d in dotted if not resolves(d)) == []


def test_a_name_that_is_gone_is_caught():
    assert not resolves("registry.reruns.harness.timing.NO_SUCH_SETTING")
    assert not resolves("registry.no_such_module")
