"""Bulk export of the public registry: streamed CSV and JSON Lines.

Rows come from the database in chunks (`.iterator()`, a server-side cursor on PostgreSQL) and go
out as they are formatted, so memory stays flat however many runs there are.
"""

import csv
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.urls import reverse

from registry import digests

CHUNK_SIZE = 2000
CSV_COLUMNS = (
    ("id", "id"),
    ("external_id", "external_id"),
    ("kernel", "kernel__slug"),
    ("implementation", "implementation__provider"),
    ("project", "implementation__project"),
    ("revision", "implementation__revision"),
    ("gpu", "environment__slug"),
    ("gpu_product", "environment__product"),
    ("operation_mode", "operation_mode"),
    ("metric", "metric"),
    ("unit", "unit"),
    ("median", "median"),
    ("p20", "p20"),
    ("p80", "p80"),
    ("workload", "workload__summary"),
    ("dtype", "workload__dtype"),
    ("x_name", "workload__x_name"),
    ("x_value", "workload__x_value"),
    ("observed_at", "observed_at"),
    ("rank", "rank"),
    ("group_size", "group_size"),
    ("evidence_level", "evidence_level"),
    ("withdrawn", "withdrawn"),
    ("superseded_by", "superseded_by_id"),
    ("comparison_key", "comparison_key"),
    ("digest", "digest"),
    ("workload_digest", "workload__digest"),
    ("source", "source__slug"),
)


class _Echo:
    """csv.writer wants a file; this one hands each formatted line straight back."""

    def write(self, value):
        return value


def csv_lines(queryset) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow([name for name, _ in CSV_COLUMNS] + ["url"])
    fields = [column for _, column in CSV_COLUMNS]
    for values in queryset.order_by("id").values_list(*fields).iterator(chunk_size=CHUNK_SIZE):
        row = ["" if v is None else (v.isoformat() if hasattr(v, "isoformat") else v) for v in values]
        yield writer.writerow(row + [reverse("registry:run-detail", args=[values[0]])])


def jsonl_lines(queryset) -> Iterator[bytes]:
    """One canonical manifest per line: each line's sha256 is its run's digest."""
    manifests = queryset.order_by("id").values_list("manifest", flat=True).iterator(chunk_size=CHUNK_SIZE)
    for manifest in manifests:
        yield digests.canonical_bytes(manifest) + b"\n"


def csv_response(queryset, *, filename: str = "kernelindex-runs.csv") -> StreamingHttpResponse:
    response = StreamingHttpResponse(csv_lines(queryset), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def jsonl_response(queryset, *, filename: str = "kernelindex-manifests.jsonl") -> StreamingHttpResponse:
    response = StreamingHttpResponse(jsonl_lines(queryset), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
