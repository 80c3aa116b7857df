"""The harness imports no Django: the kit ships it to machines without Django, and the worker's
settings come in as arguments. A fresh interpreter imports the harness package and every module
the kit ships (as they are in the repository) and fails if any `django` module was loaded."""

import json
import subprocess
import sys
from pathlib import Path

from registry.reruns.kit import build

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "registry" / "reruns" / "harness"


def shipped_modules() -> list[str]:
    """The dotted names, in this repository, of the files the kit is built from."""
    names = ["registry.reruns.harness"]
    for path in build._sources():
        relative = path.resolve().relative_to(ROOT).with_suffix("")
        if path.name == "cli.py":
            continue  # it runs only inside the installed kit, importing kernelindex_kit
        names.append(".".join(relative.parts))
    return names


def django_loaded_by(modules: list[str]) -> list[str]:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, env={"PATH": ""}
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def harness_modules() -> list[str]:
    """Every module of the harness package, those the kit does not ship included (the GPU side's
    distributed and CPU Triton runs), and the GPU side of KernelBench's measurements."""
    names = [f"registry.reruns.harness.{path.stem}" for path in sorted(HARNESS.glob("*.py"))]
    names = [name.removesuffix(".__init__") for name in names]
    return [*names, "registry.sources.kernelbench.harness", "registry.sources.kernelbench.gpu_sweep"]


def test_the_harness_and_the_kit_import_no_django():
    modules = shipped_modules()
    assert "registry.reruns.harness.timing" in modules and "registry.stats.medians" in modules
    assert django_loaded_by(modules) == []


def test_no_module_of_the_harness_imports_django():
    modules = harness_modules()
    assert {"registry.reruns.harness.distributed", "registry.reruns.harness.runner"} <= set(modules)
    assert django_loaded_by(modules) == []


def test_the_probe_sees_django_when_it_is_imported():
    assert "django.conf" in django_loaded_by(["registry.reruns.harness", "django.conf"])


def test_the_harness_states_the_importers_facts_it_needs_without_importing_the_importer():
    from registry.reruns import harness
    from registry.reruns.harness import spec
    from registry.sources.liger import catalog

    assert spec.DTYPES == catalog.DTYPES
    assert harness.LIGER_REPOSITORY == catalog.LIGER_REPOSITORY
    # Of the sources, the harness imports Liger's mapping alone (a module of the standard library
    # only, which the kit ships as harness/kernels.py), never the importer.
    for path in (ROOT / "registry" / "reruns" / "harness").glob("*.py"):
        text = path.read_text(encoding="utf-8").replace("registry.sources.liger.harness", "")
        assert "registry.sources" not in text, path.name
