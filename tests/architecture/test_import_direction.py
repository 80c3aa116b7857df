"""Arrows run one way: the rerun app (registry/reruns/) may import the registry's models and
services; the registry does not import the rerun app. The imports that still go the other way
are listed here, each with its reason, and the list is kept exact: a new one fails, and so does
a listed one that is gone (take it off the list)."""

from tests.architecture.imports import app_modules, imports_of

RERUNS = "registry.reruns"

# (importer, imported): why it stays.
EXCEPTIONS = {
    ("registry.evidence", "registry.reruns.models"): (
        "the run page and the run API show a run's controlled jobs: the run page's read model "
        "(registry/run_page.py) reads them through evidence.py, as do the runs API's lists, the run "
        "tables' host-bound label and the rank intervals"
    ),
    ("registry.evidence", "registry.reruns.judgement"): "the run page's notice for an unsettled run",
    ("registry.evidence", "registry.reruns.judged"): (
        "a job's figures rest on the samples its verdict judges, and the rank intervals on their "
        "stored interval"
    ),
    ("registry.evidence", "registry.reruns.harness.timing"): (
        "the run page explains host-paced timing with the harness's own thresholds"
    ),
    ("registry.evidence", "registry.reruns.harness"): (
        "the run page flags a job whose upstream warm-up was missed, by the harness's kernel table "
        "(Liger's mapping, which the harness package gives)"
    ),
    ("registry.rank_status", "registry.reruns.judgement"): (
        "a rank against a controlled run uses the verdict's difference interval"
    ),
    ("registry.filters", "registry.reruns.models"): (
        "the runs API filters runs by their reruns' verdict class (a subquery on the jobs)"
    ),
    ("registry.sources.kernelbench.harness", "registry.reruns.harness.timing"): (
        "KernelBench's harness mapping samples with the protocol's own timing loop"
    ),
    ("registry.sources.kernelbench.gpu_sweep", "registry.reruns.harness.timing"): (
        "a GPU host's sweep of KernelBench problems takes the protocol's default timing settings"
    ),
    ("registry.sources.kernelbench.measurements", "registry.reruns.harness.timing"): (
        "a KernelBench measurement's protocol is the timing loop's own description"
    ),
    ("registry.sources.kernelbench.measurements", "registry.reruns.models"): (
        "a KernelBench measurement is recorded as a measure job with its raw samples"
    ),
    ("registry.sources.kernelbench.measurements", "registry.reruns.services.measured_run"): (
        "and as the measured controlled run, through the one service that writes them"
    ),
    ("registry.sources.kernelbench.measurements", "registry.reruns.services.record"): (
        "a measurement on another card is a rerun, judged by the one evidence rule"
    ),
    ("registry.sources.kernelbench.measurements", "registry.reruns.harness.job_result"): (
        "a sweep line's rerun is finished from the result a worker would send (its wire form)"
    ),
    ("registry.speed_of_light", "registry.reruns.models"): (
        "a run's speed of light is computed from its GPU model's measured ceilings, which ceilings "
        "jobs of the rerun app measure (MeasuredCeiling lives there)"
    ),
}


def registry_to_reruns() -> set[tuple[str, str]]:
    return {
        (imp.importer, imp.imported)
        for imp in imports_of(app_modules())
        if imp.importer.startswith("registry")
        and not imp.importer.startswith(RERUNS)
        and imp.imported.startswith(RERUNS)
    }


def test_the_registry_imports_the_rerun_app_only_where_listed():
    unlisted = registry_to_reruns() - set(EXCEPTIONS)
    assert unlisted == set(), f"the registry imports the rerun app: {sorted(unlisted)}"


def test_every_listed_exception_still_exists():
    assert set(EXCEPTIONS) - registry_to_reruns() == set()


def test_the_rerun_app_imports_the_registry():
    """The arrow the other way is the allowed one, and it is there (the check reads the graph)."""
    found = {(i.importer, i.imported) for i in imports_of(app_modules())}
    assert ("registry.reruns.models", "registry.models") in found
