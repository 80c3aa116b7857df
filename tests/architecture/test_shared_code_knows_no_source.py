"""The shared code knows the shape of a source, never a member. No module of the app code outside
the plug-in folders (registry/sources/<name>/) imports one of them: not the run writer every
source's services use (registry/services/), not the rerun app (its jobs reach the source whose
workloads they measure through the plug-in: SourcePlugin.measured_fields, rerun_targets_loader),
not the registry's own management commands or Celery tasks (each source's are in its folder, an
app of its own). A source's own services import the shared writer, not the other way round; the
shared code reaches the sources only through the registered plug-ins (registry.sources.plugins),
and settings name them, one line each, in INSTALLED_APPS."""

from tests.architecture.imports import app_modules, imports_of

SHARED = "registry.services"
SOURCES = "registry.sources."


def in_a_plug_in(module: str) -> bool:
    return module.startswith(SOURCES)


def shared_to_sources() -> set[tuple[str, str]]:
    return {
        (imp.importer, imp.imported)
        for imp in imports_of(app_modules())
        if not in_a_plug_in(imp.importer) and in_a_plug_in(imp.imported)
    }


def test_no_shared_module_imports_a_source():
    assert shared_to_sources() == set()


def test_the_parts_that_once_reached_into_liger_are_among_those_checked():
    """The rerun pipeline, its operations page, the sweep and the registry's commands are in the
    graph the check reads, so a new import of a source from them would fail it."""
    checked = set(app_modules())
    for module in (
        "registry.reruns.services.worker",
        "registry.reruns.services.measured_run",
        "registry.reruns.sweep.loop",
        "registry.reruns.operations",
        "registry.reruns.management.commands.load_bundled_data",
        "registry.management.commands.source_counts",
        SHARED + ".imports",
    ):
        assert module in checked and not in_a_plug_in(module)


def test_a_source_imports_the_shared_run_writer():
    """The arrow the other way is the allowed one, and it is there (the check reads the graph)."""
    found = {(i.importer, i.imported) for i in imports_of(app_modules())}
    assert ("registry.sources.liger.services", "registry.services.imports") in found
    assert ("registry.sources.kernelbench.services", "registry.services.imports") in found
