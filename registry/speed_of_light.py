"""Speed of light: the least time a workload can take on a GPU, and how close a run came to it.

What a workload must move and compute is counted by its source (each source's `work_counter`,
registry/sources/: Liger's formulas per kernel, `registry/sources/liger/work.py`; KernelBench's
from a problem's input shapes, `registry/sources/kernelbench/work.py`): the bytes and FLOPs of the
timed pass, and the bytes live through it.

A run's floor is max(bytes / memory bandwidth, FLOPs / dense throughput at its dtype), against the
datasheet (registry/data/gpu-ceilings.json) and, where KernelIndex measured the GPU model
(`MeasuredCeiling`), against that too; its percentage of the speed of light is floor / median.
A peak-memory run's floor is the bytes of the forward's inputs, which are allocated before the
peak is reset and stay live through the pass. Above 100% of the datasheet speed of light, or a
peak below that floor, the run is `implausible`. The evidence level is never touched here.
"""

import functools
import hashlib
import json
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Q

from registry import sources
from registry.models import BenchmarkRun, Metric
from registry.reruns.models import MeasuredCeiling

CEILINGS_FILE = Path(__file__).resolve().parent / "data" / "gpu-ceilings.json"
MIB = 2**20
SOL_FIELDS = ["speed_of_light", "sol_percent", "sol_percent_measured", "implausible"]


# --- ceilings -------------------------------------------------------------------------------------


@functools.cache
def datasheet() -> dict:
    """The datasheet ceilings per GPU model slug, read once per process."""
    return json.loads(CEILINGS_FILE.read_text())["gpus"]


def datasheet_ceiling(gpu_slug: str, dtype: str) -> dict | None:
    gpu = datasheet().get(gpu_slug)
    if gpu is None or dtype not in gpu["dense_tflops"]:
        return None
    bandwidth, tflops = gpu["memory_bandwidth"], gpu["dense_tflops"][dtype]
    return {
        "kind": "datasheet",
        "product": gpu["product"],
        "bandwidth_gbs": bandwidth["value"],
        "bandwidth_source": bandwidth["source"],
        "tflops": tflops["value"],
        "tflops_source": tflops["source"],
    }


def measured_ceiling(ceiling: MeasuredCeiling | None, dtype: str, gpu_slug: str) -> dict | None:
    """KernelIndex's own figures: the copy bandwidth, and the bf16 GEMM for bf16 and fp16 work
    (other dtypes keep the datasheet's throughput, which KernelIndex has not measured)."""
    if ceiling is None:
        return None
    sheet = datasheet_ceiling(gpu_slug, dtype)
    own_gemm = dtype in ("bf16", "fp16") or sheet is None
    return {
        "kind": "measured",
        "product": ceiling.gpu_name or gpu_slug,
        "bandwidth_gbs": ceiling.memory_bandwidth,
        "bandwidth_source": f"measured by KernelIndex on {ceiling.measured_at:%Y-%m-%d} (device-to-device copy)",
        "tflops": ceiling.bf16_tflops if own_gemm else sheet["tflops"],
        "tflops_source": f"measured by KernelIndex on {ceiling.measured_at:%Y-%m-%d} (bf16 GEMM)"
        if own_gemm
        else sheet["tflops_source"],
    }


# --- a run's verdict ------------------------------------------------------------------------------


def floor_seconds(work: dict, ceiling: dict) -> float:
    return max(work["bytes"] / (ceiling["bandwidth_gbs"] * 1e9), work["flops"] / (ceiling["tflops"] * 1e12))


def work_of(*, kernel: str, workload, operation_mode: str) -> dict:
    """What the workload's timed pass must move and compute, or the reason it is not counted."""
    return sources.work_counted(workload, operation_mode, kernel=kernel) or {
        "reason": f"no formula for {kernel}: its work is not counted"
    }


def verdict(
    *,
    kernel: str,
    workload,
    operation_mode: str,
    metric: str,
    median: float,
    gpu_slug: str,
    measured=None,
    work: dict | None = None,
) -> dict:
    """What the run's speed-of-light section shows and its columns hold: the counts, each
    ceiling with its floor and percentage, and whether the figure is impossible. `work`:
    `work_of` the same kernel, workload and pass, for a writer of many runs that share it."""
    if work is None:
        work = work_of(kernel=kernel, workload=workload, operation_mode=operation_mode)
    if "reason" in work:
        return {"countable": False, "reason": work["reason"]}
    if metric == Metric.MEMORY:
        floor_mib = work["live_bytes"] / MIB
        return {
            "countable": True,
            "metric": "memory",
            **work,
            "floor_mib": floor_mib,
            "percent": _percent(floor_mib, median),
            "implausible": median < floor_mib,
        }
    out = {"countable": True, "metric": "latency", **work, "ceilings": []}
    for ceiling in (
        datasheet_ceiling(gpu_slug, work["dtype"]),
        measured_ceiling(measured, work["dtype"], gpu_slug),
    ):
        if ceiling is None:
            continue
        floor_ms = 1e3 * floor_seconds(work, ceiling)
        bound = (
            "memory"
            if work["bytes"] / ceiling["bandwidth_gbs"] >= work["flops"] / (1e3 * ceiling["tflops"])
            else "compute"
        )
        out["ceilings"].append(
            {**ceiling, "floor_ms": floor_ms, "bound": bound, "percent": _percent(floor_ms, median)}
        )
    if not out["ceilings"]:
        return {"countable": True, **work, "reason": f"no ceilings are known for {gpu_slug}", "ceilings": []}
    sheet = out["ceilings"][0] if out["ceilings"][0]["kind"] == "datasheet" else None
    out["implausible"] = bool(sheet and (sheet["percent"] is None or sheet["percent"] > 100))
    return out


def _percent(floor: float, measured: float) -> float | None:
    """floor / measured × 100; None for a measured figure of zero (no finite percentage: a time
    of zero is faster than any floor, so the run is implausible)."""
    return 100 * floor / measured if measured > 0 else None


def columns(sol: dict) -> dict:
    """The run's filterable columns from its verdict."""
    by_kind = {c["kind"]: c["percent"] for c in sol.get("ceilings", [])}
    percent = sol.get("percent") if sol.get("metric") == "memory" else by_kind.get("datasheet")
    return {
        "sol_percent": percent,
        "sol_percent_measured": by_kind.get("measured"),
        "implausible": bool(sol.get("implausible")),
    }


def measured_ceilings() -> dict:
    """The latest measured ceilings of each GPU model, by its slug (one query)."""
    measured = {}
    for ceiling in MeasuredCeiling.objects.order_by("gpu_slug", "-measured_at"):
        measured.setdefault(ceiling.gpu_slug, ceiling)
    return measured


def sol_fields(
    *,
    kernel: str,
    workload,
    operation_mode: str,
    metric: str,
    median: float,
    gpu_slug: str,
    measured,
    work: dict | None = None,
) -> dict:
    """The run's SOL_FIELDS, by attribute name: the verdict and the columns taken from it.
    `measured` is measured_ceilings(); `work` as `verdict` takes it."""
    sol = verdict(
        kernel=kernel,
        workload=workload,
        operation_mode=operation_mode,
        metric=metric,
        median=median,
        gpu_slug=gpu_slug,
        measured=measured.get(gpu_slug),
        work=work,
    )
    sol["basis"] = verdict_basis()
    return {"speed_of_light": sol, **columns(sol)}


@functools.cache
def verdict_basis() -> str:
    """A digest of what every verdict is computed from besides its run and the measured ceilings:
    this file (the formulas) and the datasheet file. Stored in each verdict, so that the runs a
    deploy left behind can be found by a query. Any edit of this file counts: at worst one fill
    of every run that was not needed."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(CEILINGS_FILE.read_bytes())
    for counter in sources.work_counter_files():  # the sources' own formulas count too
        digest.update(counter.read_bytes())
    return digest.hexdigest()[:16]


def speed_of_light_stale():
    """The runs whose verdict no writer has brought up to date: those without one (written before
    migration 0010) and those computed from other formulas or datasheet figures. A run's verdict
    is otherwise current: it is written with the run, and a new measured ceiling fills its GPU
    model's runs as it is created (measured_ceiling_create)."""
    # A verdict without the key fails both `=` and `<>` in SQL: it is asked for by name.
    other_basis = ~Q(speed_of_light__basis=verdict_basis())
    return BenchmarkRun.objects.filter(Q(speed_of_light__basis__isnull=True) | other_basis)


@transaction.atomic
def speed_of_light_fill(*, runs) -> int:
    """Compute and store the verdict of `runs` (one UPDATE per changed run); returns how many
    changed. New runs of an import get theirs as they are built (imports._runs_build)."""
    measured = measured_ceilings()
    changed = []
    rows = runs.select_related("kernel", "workload", "environment").only(
        "kernel__slug",
        "workload__parameters",
        "workload__dtype",
        "environment__slug",
        "operation_mode",
        "metric",
        "median",
        "speed_of_light",
        "sol_percent",
        "sol_percent_measured",
        "implausible",
    )
    for run in rows.iterator(chunk_size=2000):
        fields = sol_fields(
            kernel=run.kernel.slug,
            workload=run.workload,
            operation_mode=run.operation_mode,
            metric=run.metric,
            median=run.median,
            gpu_slug=run.environment.slug,
            measured=measured,
        )
        if any(getattr(run, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(run, k, v)
            changed.append(run)
    _sol_write(changed)
    return len(changed)


def _sol_write(runs: list) -> None:
    """One parameterised UPDATE per run, sent with executemany (psycopg pipelines it): bulk_update's
    CASE WHEN over every row cost three quarters of an import's time (docs/performance.md)."""
    if not runs:
        return
    fields = [BenchmarkRun._meta.get_field(name) for name in SOL_FIELDS]
    database = connections[DEFAULT_DB_ALIAS]
    assignments = ", ".join(f"{database.ops.quote_name(f.column)} = %s" for f in fields)
    sql = f"UPDATE {database.ops.quote_name(BenchmarkRun._meta.db_table)} SET {assignments} WHERE id = %s"
    params = [
        [f.get_db_prep_save(getattr(run, f.attname), database) for f in fields] + [run.pk] for run in runs
    ]
    with database.cursor() as cursor:
        cursor.executemany(sql, params)


def speed_of_light_report(runs=None) -> dict:
    """The figures `speed_of_light_report` prints (docs/reports/): countable kernels, implausible runs, and per GPU model the
    distribution of the current latency runs' percentages (datasheet; measured where known)."""
    import numpy as np

    from registry.models import Kernel

    runs = BenchmarkRun.objects.current() if runs is None else runs
    slugs = list(Kernel.objects.order_by("slug").values_list("slug", flat=True))
    by_gpu: dict[str, dict[str, list]] = {}
    rows = runs.filter(metric=Metric.LATENCY).values_list(
        "gpu_product", "sol_percent", "sol_percent_measured"
    )
    for product, datasheet_pct, measured_pct in rows:
        gpu = by_gpu.setdefault(product, {"datasheet": [], "measured": [], "runs": 0})
        gpu["runs"] += 1
        for kind, value in (("datasheet", datasheet_pct), ("measured", measured_pct)):
            if value is not None:
                gpu[kind].append(value)

    def spread(values: list) -> dict | None:
        if not values:
            return None
        p5, median, p95 = np.percentile(values, [5, 50, 95])
        return {"count": len(values), "median": float(median), "p5": float(p5), "p95": float(p95)}

    implausible = runs.filter(implausible=True).order_by("kernel__slug", "gpu_product", "external_id")
    # Countable: a source's formula for the kernel, or a source's counter that counted one of its runs.
    counted_by_source = set(
        runs.filter(speed_of_light__countable=True).values_list("kernel__slug", flat=True).distinct()
    )
    formulas = sources.work_kernels()
    countable = [s for s in slugs if s in formulas or s in counted_by_source]
    return {
        "kernels": len(slugs),
        "countable": countable,
        "uncounted": {s: "no formula" for s in slugs if s not in formulas and s not in counted_by_source},
        "not_counted": sorted(
            {
                (kernel, mode, sol.get("reason", ""))
                for kernel, mode, sol in runs.values_list("kernel__slug", "operation_mode", "speed_of_light")
                if not sol.get("countable")
            }
        ),
        "runs_with_percent": runs.filter(sol_percent__isnull=False).count(),
        "runs": runs.count(),
        "implausible": list(implausible.values_list("external_id", "median", "unit", "sol_percent")),
        "per_gpu": {
            gpu: {"runs": v["runs"], "datasheet": spread(v["datasheet"]), "measured": spread(v["measured"])}
            for gpu, v in sorted(by_gpu.items())
        },
    }
