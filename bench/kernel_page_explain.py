"""EXPLAIN (ANALYZE, BUFFERS) of every query of the largest kernel's page, as the page ran them after 6
warm requests. Run from a checkout's root with bench.common.django_env's variables and
DATABASE_PREPARED_STATEMENTS=0, so the captured SQL is literal:

    cd <checkout> && DATABASE_PREPARED_STATEMENTS=0 DATABASE_URL=… python bench/kernel_page_explain.py
"""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import django  # noqa: E402

django.setup()
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402

from registry.models import Kernel  # noqa: E402

kernel = Kernel.objects.annotate(n=Count("runs")).order_by("-n").first()
path = reverse("registry:kernel-detail", args=[kernel.slug])
client = Client(HTTP_HOST="127.0.0.1")
for _ in range(6):
    client.get(path)
with CaptureQueriesContext(connection) as q:
    t = time.perf_counter()
    r = client.get(path)
    total = time.perf_counter() - t
print(
    f"kernel {kernel.slug} runs={kernel.n} status={r.status_code} request_ms={total * 1000:.0f} sql_ms={sum(float(x['time']) for x in q.captured_queries) * 1000:.0f} queries={len(q.captured_queries)}"
)
with connection.cursor() as cursor:
    for i, query in enumerate(q.captured_queries):
        sql = query["sql"]
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        plan = [row[0] for row in cursor.fetchall()]
        print(f"\n=== query {i + 1}: {float(query['time']) * 1000:.1f} ms in the request; {sql[:300]}")
        for line in plan:
            if len(plan) < 40 or any(
                k in line
                for k in (
                    "Limit",
                    "Sort",
                    "Index",
                    "Seq Scan",
                    "Execution",
                    "Planning",
                    "Unique",
                    "Hash",
                    "Nested",
                    "SubPlan",
                )
            ):
                print("   ", line[:200])
