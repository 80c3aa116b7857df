"""The shared import code knows the shape of a source, never a member: registry/services/ (the run
writer every source's services use, ranks, changes) imports no source's folder. A source's own
services import the shared writer (registry/sources/<name>/services.py), not the other way round;
the shared code reaches the sources only through the registered plug-ins (registry.sources.plugins)."""

from tests.architecture.imports import app_modules, imports_of

SHARED = "registry.services"
SOURCES = "registry.sources."


def shared_to_sources() -> set[tuple[str, str]]:
    return {
        (imp.importer, imp.imported)
        for imp in imports_of(app_modules())
        if (imp.importer == SHARED or imp.importer.startswith(SHARED + "."))
        and imp.imported.startswith(SOURCES)
    }


def test_the_shared_services_import_no_source():
    assert shared_to_sources() == set()


def test_a_source_imports_the_shared_run_writer():
    """The arrow the other way is the allowed one, and it is there (the check reads the graph)."""
    found = {(i.importer, i.imported) for i in imports_of(app_modules())}
    assert ("registry.sources.liger.services", "registry.services.imports") in found
    assert ("registry.sources.kernelbench.services", "registry.services.imports") in found
