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
# (importer, imported): why it stays. Kept exact: a new one fails, and so does a listed one that is gone.
EXCEPTIONS = {
    ("registry.reruns.harness", "registry.sources.liger.harness"): (
        "the rerun harness is Liger's: it runs liger-kernel's own benchmark scripts, and which script "
        "and provider measure a kernel is Liger's mapping, kept in Liger's folder; the harness has no "
        "Django (the kit ships it), so it cannot look the plug-in up"
    ),
    ("registry.reruns.harness.spec", "registry.sources.liger.harness"): (
        "the job spec check refuses a kernel or provider Liger's mapping does not hold"
    ),
}


def in_a_plug_in(module: str) -> bool:
    return module.startswith(SOURCES)


def shared_to_sources() -> set[tuple[str, str]]:
    return {
        (imp.importer, imp.imported)
        for imp in imports_of(app_modules())
        if not in_a_plug_in(imp.importer) and in_a_plug_in(imp.imported)
    }


def test_no_shared_module_imports_a_source_except_the_liger_harness():
    unlisted = shared_to_sources() - set(EXCEPTIONS)
    assert unlisted == set(), f"shared code imports a source: {sorted(unlisted)}"


def test_every_listed_exception_still_exists():
    assert set(EXCEPTIONS) - shared_to_sources() == set()


def test_the_liger_harness_reaches_liger_only_through_its_mapping():
    """The mapping is the one module of a source the harness may import: it imports nothing of
    the site, so the kit can ship it."""
    imported = {imported for _, imported in EXCEPTIONS}
    assert imported == {"registry.sources.liger.harness"}
    of_mapping = {i.imported for i in imports_of(app_modules()) if i.importer in imported}
    assert of_mapping == set()


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
