"""A module's file name says what it is and is unique in the app code (registry/, attestations/,
kernelindex/, migrations aside), so that a name met in a traceback, an import or the docs points to
one file.

Two kinds of name may repeat:
- Django's and the house's per-app names (STYLE.md's layout): every app, or app-like package
  such as the reproduction kit, may have its own `models.py`, `views.py`, `urls.py`, `services.py`
  and so on (`PER_APP`). A package's `__init__.py` is one of them.
- The parts of the per-source plug-in folders, `registry/sources/<name>/`, which have one shape
  (docs/sources.md): each source's `history.py` or `importer.py` is that source's, and the shared
  code finds them by the shape. A plug-in's module may not take a name of the shared code,
  though: `registry/sources/kernelbench/controlled.py` beside `registry/reruns/controlled.py` was
  two things under one name.
"""

from collections import defaultdict
from pathlib import Path

from tests.architecture.imports import ROOT, app_modules

PER_APP = {
    "__init__.py",
    "apps.py",
    "admin.py",
    "models.py",
    "urls.py",
    "views.py",
    "api.py",
    "api_urls.py",
    "tasks.py",
    "services.py",
    "selectors.py",
    "serializers.py",
    "forms.py",
}
SOURCES = ("registry", "sources")


def plug_in(relative: Path) -> str | None:
    """The source whose plug-in folder holds this module (registry/sources/<name>/...), else None."""
    parts = relative.parts
    if parts[:2] == SOURCES and len(parts) > 3:
        return parts[2]
    return None


def shared_names(paths: list[Path]) -> dict[str, list[str]]:
    """File names held by more than one module where the rule forbids it, with their paths."""
    by_name: dict[str, list[Path]] = defaultdict(list)
    for path in paths:
        if path.name not in PER_APP:
            by_name[path.name].append(path)
    clashes = {}
    for name, holders in by_name.items():
        shared = [p for p in holders if plug_in(p) is None]
        if len(shared) > 1 or (shared and len(holders) > len(shared)):
            clashes[name] = sorted(str(p) for p in holders)
    return clashes


def app_paths() -> list[Path]:
    return [path.relative_to(ROOT) for path in app_modules().values()]


def test_no_two_modules_share_a_file_name():
    paths = app_paths()
    assert len(paths) > 100
    assert shared_names(paths) == {}


def test_the_plug_in_folders_share_their_shape():
    """The repeated names the rule lets through are there, so the exemption is still needed."""
    histories = [p for p in app_paths() if p.name == "history.py"]
    assert {plug_in(p) for p in histories} == {"liger", "kernelbench"}


def test_a_shared_name_is_caught():
    assert shared_names([Path("registry/changes.py"), Path("registry/services/changes.py")]) == {
        "changes.py": ["registry/changes.py", "registry/services/changes.py"]
    }
    plug_in_and_shared = [Path("registry/reruns/controlled.py"), Path("registry/sources/kb/controlled.py")]
    assert list(shared_names(plug_in_and_shared)) == ["controlled.py"]
    two_plug_ins = [Path("registry/sources/a/history.py"), Path("registry/sources/b/history.py")]
    assert shared_names(two_plug_ins) == {}
    assert shared_names([Path("registry/views.py"), Path("registry/reruns/views.py")]) == {}
