"""The kernel page's list and panel queries on the largest kernel, each in its old form (sorting and
grouping on the spec rows' columns) and its new one (the run's own copies, services.run_keys):
median wall time of 40 runs after 5 warm ones, same process, same database.

    cd <checkout> && DATABASE_URL=… DJANGO_SETTINGS_MODULE=bench.settings … python bench/kernel_page_queries.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())
import django  # noqa: E402

django.setup()
from django.db.models import Count  # noqa: E402

from registry import selectors  # noqa: E402
from registry.models import BenchmarkRun, Kernel, Workload  # noqa: E402
from registry.views import KERNEL_DEFAULT_ORDER  # noqa: E402

JOINED = (
    "environment__product",
    "operation_mode",
    "metric",
    "implementation__provider",
    "workload__x_value",
    "id",
)
OLD_PANEL = ("metric", "environment__slug", "environment__product", "operation_mode", "workload__x_name")
k = Kernel.objects.annotate(n=Count("runs")).order_by("-n").first()
runs = BenchmarkRun.objects.filter(kernel=k)
current = runs.current()
x_names = set(Workload.objects.filter(kernel=k).values_list("x_name", flat=True))
cases = {
    "list old (joined sort)": lambda: list(runs.order_by(*JOINED).values_list("pk", flat=True)[:50]),
    "list new (run columns)": lambda: list(
        runs.order_by(*KERNEL_DEFAULT_ORDER).values_list("pk", flat=True)[:50]
    ),
    "panels old (DISTINCT)": lambda: list(current.order_by().values(*OLD_PANEL).distinct()),
    "panels new (EXISTS probes)": lambda: selectors.chart_panels(current, kernel=k, x_names=x_names),
    "count": lambda: runs.count(),
}
assert cases["list old (joined sort)"]() == cases["list new (run columns)"]()
out = [f"{os.environ['DATABASE_URL'].rsplit('/', 1)[1]} {k.slug} runs={k.n}"]
for name, fn in cases.items():
    for _ in range(5):
        fn()
    times = []
    for _ in range(40):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    out.append(f"{name}={statistics.median(times) * 1000:.2f}ms")
print("  ".join(out))
