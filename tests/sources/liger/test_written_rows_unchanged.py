"""A first import of the bundled CSV writes exactly the rows it wrote before the import was made
faster: the runs (every column), the specs and the kernels, read back and hashed. A change to the
writer, the manifests, the digests or the speed of light that changes a single value fails here;
one that means to change what is written updates the hash and says why.

What varies from one database to the next is left out: primary keys (a foreign key is read as
its target's natural key, a digest or a slug), and the write's own timestamps. JSON documents are
compared as documents: PostgreSQL stores jsonb, so the text they were sent as is not kept."""

import hashlib
import json

import pytest

from registry.models import BenchmarkRun, Environment, Implementation, Kernel, Protocol, Workload
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import

# The hash of the bundled CSV's first import, by the code before the manifests were assembled from
# templates (commit 261451f), on PostgreSQL and SQLite alike.
WRITTEN_BEFORE = "f2b61c74ffa2e7a6b05535d99f109867"

# Columns whose values are the database's or the clock's, not the import's.
NOT_COMPARED = {"id", "published_at", "updated_at"}
# A foreign key, read as what its target is known by.
NATURAL_KEYS = {
    "kernel": "kernel__slug",
    "implementation": "implementation__digest",
    "workload": "workload__digest",
    "protocol": "protocol__digest",
    "environment": "environment__digest",
    "source": "source__slug",
    "first_import": "first_import__file_digest",
    "origin": "origin__file_digest",
    "superseded_by": "superseded_by__digest",
}


def _columns(model) -> list[str]:
    names = []
    for field in model._meta.concrete_fields:
        if field.name in NOT_COMPARED:
            continue
        names.append(NATURAL_KEYS.get(field.name, f"{field.name}__slug") if field.is_relation else field.name)
    return names


def _text(value) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value.isoformat() if hasattr(value, "isoformat") else repr(value)


def written_rows_hash() -> str:
    digest = hashlib.md5(usedforsecurity=False)
    for model, order in (
        (BenchmarkRun, "digest"),
        (Workload, "digest"),
        (Implementation, "digest"),
        (Protocol, "digest"),
        (Environment, "digest"),
        (Kernel, "slug"),
    ):
        columns = _columns(model)
        for row in model.objects.order_by(order).values_list(*columns):
            digest.update("\t".join(map(_text, row)).encode() + b"\n")
    return digest.hexdigest()


@pytest.mark.django_db
def test_the_first_import_writes_the_rows_it_wrote_before():
    liger_import(path=BUNDLED_LIGER_CSV)

    assert BenchmarkRun.objects.count() == 2448
    assert written_rows_hash() == WRITTEN_BEFORE
