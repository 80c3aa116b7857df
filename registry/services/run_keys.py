"""Copies of a run's spec values on the run's own row: the kernel page's sort and panel keys.

The kernel page sorts a kernel's runs by GPU product, pass, metric, provider and swept value, and
groups its charts by GPU, pass, metric and swept parameter. With the GPU product, the provider and
the swept parameter on joined rows, PostgreSQL sorts every run of the kernel to keep 50; on the
run's own row, an index in the page's order reads 50 entries (models.BenchmarkRun.Meta.indexes).

Specs are content-addressed and a run never changes its specs, so a copy written with the run
stays true. Every service that creates runs writes them in its transaction: the import's run writer
with each row (imports._runs_build, `run_keys_of`), the others with `run_keys_fill` on their runs.
"""

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery

from registry.models import Environment, Implementation, Workload

# The run's column: (the spec it is copied from, that spec's field).
RUN_KEY_SOURCES = {
    "gpu_product": ("environment", "product"),
    "provider": ("implementation", "provider"),
    "x_name": ("workload", "x_name"),
    "x_value": ("workload", "x_value"),
}
SPEC_MODELS = {"environment": Environment, "implementation": Implementation, "workload": Workload}


@transaction.atomic
def run_keys_fill(*, runs: QuerySet) -> int:
    """Copy the keys onto `runs` in one set-based UPDATE; returns how many runs it wrote."""
    values = {
        column: Subquery(SPEC_MODELS[spec].objects.filter(pk=OuterRef(f"{spec}_id")).values(name)[:1])
        for column, (spec, name) in RUN_KEY_SOURCES.items()
    }
    return runs.order_by().update(**values)


def run_keys_of(**specs) -> dict:
    """The same keys for a run still being built in Python, from its spec rows (`environment=`,
    `implementation=`, `workload=`): for writers that set every column themselves (COPY)."""
    return {column: getattr(specs[spec], name) for column, (spec, name) in RUN_KEY_SOURCES.items()}
