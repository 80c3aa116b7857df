"""Sources of benchmark data, each a folder of one shape (docs/sources.md says how to add one).

A source is a package `registry/sources/<name>/` that is a Django app of its own (its `apps.py`,
its `management/commands/`, its Celery `tasks.py`; no models) and whose `__init__.py` defines
`SOURCE`, a `SourcePlugin`. The registered sources are the installed apps that define one, in
INSTALLED_APPS order: adding a source is its folder and one line of settings. The shared code
(load_bundled_data, source_counts, the pages) reads the plug-ins and knows nothing of any one of
them. No Django at import time: the harness, which runs without Django, imports from these
packages too.
"""

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path


@dataclass(frozen=True)
class SourcePlugin:
    slug: str  # the Source row's slug
    name: str
    package: str
    # "module:function" loading the data the repository ships (takes progress=, returns a summary).
    bundled_loader: str
    licence: Path  # the licence text shipped beside the data
    provenance: Path  # SOURCE.md: where the data came from and how it was built
    # Why runs of this source compare with no other source's, in words (the compare page).
    comparability: str = ""
    # The implementation the others are measured against on a kernel's page (registry/baselines.py),
    # "" for none.
    baseline_provider: str = ""
    # "module:function" taking a search query and returning a Q over Kernel (or None): how the
    # source's own names for its kernels are found (KernelBench: "L1 #19", "19_ReLU.py").
    kernel_search: str = ""
    # "module:function" taking (workload, operation_mode, kernel=the kernel's slug) and returning
    # {bytes, flops, live_bytes, dtype}, {reason}, or None for a workload it does not count: its
    # speed-of-light count (registry/speed_of_light.py).
    work_counter: str = ""
    # "module:name" of the kernel slugs the counter has a formula for by name (Liger's `WORK`), which
    # the speed-of-light report lists as countable whether or not a run of theirs was counted.
    work_kernels: str = ""
    # The source whose workloads the rerun app's jobs measure (Liger's, through the rerun harness,
    # registry/reruns/harness/) names two functions here; "" for a source the jobs do not measure.
    # "module:function" taking (job, software=, on_cpu=) and returning {"implementation": fields,
    # "environment": fields}: the Implementation and Environment rows of the controlled run a job
    # measured (registry/reruns/services/measured_run.py).
    measured_fields: str = ""
    # "module:function" taking no argument and loading the least of the shipped data that gives the
    # jobs their targets (the sweep, on an empty registry), returning a summary.
    rerun_targets_loader: str = ""

    @property
    def commands(self) -> tuple[str, ...]:
        """The manage.py commands this source adds: the modules of its management/commands/."""
        from django.core.management import find_commands

        folder = Path(import_module(self.package).__file__).resolve().parent / "management"
        return tuple(sorted(find_commands(str(folder))))

    def fields_of_measured(self, job, *, software: dict, on_cpu: bool) -> dict:
        return _named(self.measured_fields)(job, software=software, on_cpu=on_cpu)

    def rerun_targets_load(self):
        return _named(self.rerun_targets_loader)()

    def work_of(self, workload, operation_mode: str, *, kernel: str):
        if not self.work_counter:
            return None
        return _named(self.work_counter)(workload, operation_mode, kernel=kernel)

    def kernels_matching(self, query: str):
        return _named(self.kernel_search)(query) if self.kernel_search else None

    def load_bundled(self, *, progress: Callable[[int], None] | None = None):
        return _named(self.bundled_loader)(progress=progress)


_found: tuple[dict, list[SourcePlugin]] | None = None  # (the app registry's configs, their plug-ins)


def plugins() -> list[SourcePlugin]:
    """The registered sources, in load order (a later source may refer to an earlier one's
    workloads): the installed apps whose package defines SOURCE, in INSTALLED_APPS order.

    Found once for the app registry's set of apps: an import asks for every new run's work
    (work_counted), thousands of times. Django replaces `apps.app_configs` with another dict
    whenever the installed apps change (override_settings, modify_settings), so holding that
    dict and comparing it by identity finds them again then and only then."""
    from django.apps import apps

    global _found
    if _found is None or _found[0] is not apps.app_configs:
        found = (getattr(config.module, "SOURCE", None) for config in apps.get_app_configs())
        _found = (apps.app_configs, [source for source in found if isinstance(source, SourcePlugin)])
    return list(_found[1])


def rerun_plugin() -> SourcePlugin:
    """The source whose workloads the rerun app's jobs measure (the one naming measured_fields)."""
    found = [plugin for plugin in plugins() if plugin.measured_fields]
    if len(found) != 1:
        raise LookupError(f"one installed source must name measured_fields, not {len(found)}")
    return found[0]


def _named(target: str):
    """The function a "module:function" field names."""
    module, _, function = target.partition(":")
    return getattr(import_module(module), function)


def plugin_for(slug: str) -> SourcePlugin | None:
    return next((plugin for plugin in plugins() if plugin.slug == slug), None)


def bundled_load_all(*, progress: Callable[[int], None] | None = None) -> dict:
    """Every registered source's shipped data, in registration order: {name: summary}."""
    summaries = {}
    for plugin in plugins():
        loaded = plugin.load_bundled(progress=progress)
        summaries.update(loaded if isinstance(loaded, dict) else {plugin.slug: loaded})
    return summaries


def kernels_matching(query: str):
    """The Q over Kernel that every source's own search adds to the name search, or None."""
    found = None
    for plugin in plugins():
        q = plugin.kernels_matching(query)
        if q is not None:
            found = q if found is None else found | q
    return found


def work_counted(workload, operation_mode: str, *, kernel: str) -> dict | None:
    """The first registered source's count of a workload's least bytes and FLOPs (speed of
    light), in load order, or None where no source counts it."""
    for plugin in plugins():
        found = plugin.work_of(workload, operation_mode, kernel=kernel)
        if found is not None:
            return found
    return None


def work_kernels() -> set[str]:
    """The kernels some source has a speed-of-light formula for by name."""
    return {slug for plugin in plugins() if plugin.work_kernels for slug in _named(plugin.work_kernels)}


def work_counter_files() -> list[Path]:
    """The files of the registered sources' speed-of-light counters (their formulas)."""
    files = []
    for plugin in plugins():
        if plugin.work_counter:
            module = import_module(plugin.work_counter.partition(":")[0])
            files.append(Path(module.__file__))
    return files
