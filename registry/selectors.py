"""Reads for the public site and API, each a fixed number of queries whatever the data size.

Every read starts from `BenchmarkRun.objects.public()`; ranks and group sizes are stored on the
run at import, so no page computes them.
"""

import itertools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Exists, Max, Min, OuterRef, Q, Subquery, Value

from registry import sources
from registry.models import (
    CONTROLLED_SOURCE_SLUG,
    EVIDENCE_EXPLANATIONS,
    BenchmarkRun,
    Environment,
    EvidenceLevel,
    Implementation,
    Kernel,
    Metric,
    Source,
    TimedPass,
    Workload,
)

DIGEST = re.compile(r"(?:sha256:)?([0-9a-f]{64})")
RUN_PAGE_RELATED = ("superseded_by", "first_import")


def public_runs():
    return BenchmarkRun.objects.public()


def normalise_digest(value: str) -> str | None:
    match = DIGEST.fullmatch((value or "").strip().lower())
    return f"sha256:{match.group(1)}" if match else None


# --- home and lists -------------------------------------------------------------------------


def registry_counts() -> dict:
    runs = BenchmarkRun.objects.aggregate(
        runs=Count("id"),
        kernels=Count("kernel", distinct=True),
        gpus=Count("environment__slug", distinct=True),
        current=Count("id", filter=Q(withdrawn=False, superseded_by__isnull=True)),
        **{level: Count("id", filter=Q(evidence_level=level)) for level in EvidenceLevel.values},
    )
    runs["implementations"] = Implementation.objects.values("provider").distinct().count()
    runs["by_level"] = [
        {"level": level, "label": label, "count": runs[level], "explanation": EVIDENCE_EXPLANATIONS[level]}
        for level, label in EvidenceLevel.choices
    ]
    return runs


def kernels_overview(most_runs: int | None = None) -> list[dict]:
    """Every kernel with its run count, its runs at each evidence level (the same query: one
    filtered count per level), its implementations and the GPUs it was measured on; or only the
    `most_runs` kernels with the most runs (the home page's), most first."""
    levels = {
        f"level_{level}": Count("runs", filter=Q(runs__evidence_level=level))
        for level in EvidenceLevel.values
    }
    kernels = {
        k.pk: {
            "kernel": k,
            "runs": k.run_count,
            "levels": [
                {"level": level, "label": label, "count": getattr(k, f"level_{level}")}
                for level, label in EvidenceLevel.choices
            ],
            "gpus": [],
            "implementations": [],
        }
        for k in Kernel.objects.annotate(run_count=Count("runs"), **levels).order_by("name")
    }
    pairs = (
        BenchmarkRun.objects.values_list("kernel_id", "environment__slug", "environment__product")
        .distinct()
        .order_by("kernel_id", "environment__product")
    )
    for kernel_id, slug, product in pairs:
        kernels[kernel_id]["gpus"].append({"slug": slug, "product": product})
    providers = (
        Implementation.objects.values_list("kernel_id", "provider")
        .distinct()
        .order_by("kernel_id", "provider")
    )
    for kernel_id, provider in providers:
        kernels[kernel_id]["implementations"].append(provider)
    if most_runs is not None:
        return sorted(kernels.values(), key=lambda row: (-row["runs"], row["kernel"].name))[:most_runs]
    return list(kernels.values())


def runs_recent(limit: int = 10, *, besides=()):
    """The newest published runs, less those the home page lists as recently verified, so that
    the two lists never show the same run twice."""
    return public_runs().exclude(pk__in=[run.pk for run in besides]).order_by("-published_at", "-id")[:limit]


def runs_recently_verified(limit: int = 10):
    """Runs a KernelIndex rerun on another card reproduced, the latest first."""
    return list(
        public_runs().filter(evidence_level=EvidenceLevel.REPRODUCED).order_by("-updated_at", "-id")[:limit]
    )


def gpus_overview() -> list[dict]:
    rows = (
        BenchmarkRun.objects.values(
            "environment__slug",
            "environment__vendor",
            "environment__product",
            "environment__form_factor",
            "environment__architecture",
        )
        .annotate(runs=Count("id"), kernels=Count("kernel", distinct=True))
        .order_by("environment__vendor", "environment__product")
    )
    return [{key.removeprefix("environment__"): value for key, value in row.items()} for row in rows]


def gpu_get(slug: str) -> Environment | None:
    return Environment.objects.filter(slug=slug).order_by("pk").first()


def gpu_kernels(slug: str) -> list[dict]:
    return list(
        BenchmarkRun.objects.filter(environment__slug=slug)
        .values("kernel__slug", "kernel__name")
        .annotate(runs=Count("id"))
        .order_by("kernel__name")
    )


def implementations_overview() -> list[dict]:
    """One row per provider (as the source names it) with its project and kernels."""
    rows = (
        BenchmarkRun.objects.values("implementation__provider", "implementation__project", "kernel__slug")
        .annotate(runs=Count("id"))
        .order_by("implementation__project", "implementation__provider", "kernel__slug")
    )
    providers: dict[str, dict] = {}
    for row in rows:
        entry = providers.setdefault(
            row["implementation__provider"],
            {
                "provider": row["implementation__provider"],
                "project": row["implementation__project"],
                "kernels": [],
                "runs": 0,
            },
        )
        entry["kernels"].append(row["kernel__slug"])
        entry["runs"] += row["runs"]
    return list(providers.values())


def implementation_variants(provider: str):
    return Implementation.objects.filter(provider=provider).select_related("kernel").order_by("kernel__name")


# --- the run page ----------------------------------------------------------------------------


def run_for_page(*, pk: int | None = None, digest: str | None = None) -> BenchmarkRun | None:
    runs = public_runs().select_related(*RUN_PAGE_RELATED)
    lookup = {"pk": pk} if pk is not None else {"digest": digest}
    return runs.filter(**lookup).first()


def run_group(run: BenchmarkRun) -> list[BenchmarkRun]:
    """The run's comparison group, best first: the current runs that share its key."""
    return list(
        BenchmarkRun.objects.current()
        .filter(comparison_key=run.comparison_key)
        .select_related("implementation", "source")
        .order_by("rank", "median", "pk")
    )


def run_relatives(run: BenchmarkRun) -> tuple[list[BenchmarkRun], list[BenchmarkRun]]:
    """The run's comparison group as `run_group` reads it, and the rows it replaced, newest first
    (as `run_supersedes`): one query for both, the run page's."""
    group = BenchmarkRun.objects.current().filter(comparison_key=run.comparison_key)
    rows = (
        (group | BenchmarkRun.objects.filter(superseded_by=run))
        .select_related("implementation", "source")
        .order_by("rank", "median", "pk")
    )
    members, replaced = [], []
    for row in rows:
        (replaced if row.superseded_by_id == run.pk else members).append(row)
    return members, sorted(replaced, key=lambda row: row.observed_at, reverse=True)


def group_best_other(members: list[BenchmarkRun], run: BenchmarkRun) -> BenchmarkRun | None:
    """The run to compare with: the group's #1, or its runner-up when this run is the #1. An
    implausible run (faster than the GPU's speed of light) is never the one to beat."""
    others = [m for m in members if m.pk != run.pk and not m.implausible]
    return others[0] if others else None


def run_supersedes(run: BenchmarkRun) -> list[BenchmarkRun]:
    return list(BenchmarkRun.objects.filter(superseded_by=run).order_by("-observed_at"))


def change_percent(base: float, other: float) -> float | None:
    """How much `other` differs from `base`, in percent of `base` (negative: other is lower)."""
    if not base:
        return None
    return (other / base - 1.0) * 100.0


# --- comparing two runs ----------------------------------------------------------------------

COMPARABILITY_FIELDS = (
    ("kernel", "kernel", lambda r: r.kernel.name),
    ("operation_mode", "timed pass", lambda r: r.get_operation_mode_display()),
    ("metric", "metric", lambda r: r.get_metric_display()),
    ("workload", "workload", lambda r: r.workload.summary + f" ({r.workload.digest[:19]}…)"),
    ("family", "comparability family", lambda r: r.protocol.comparability_family),
    ("gpu", "GPU", lambda r: r.environment.product),
)
COMPARABILITY_KEYS = {
    "kernel": lambda r: r.kernel_id,
    "operation_mode": lambda r: r.operation_mode,
    "metric": lambda r: r.metric,
    "workload": lambda r: r.workload.digest,
    "family": lambda r: r.protocol.comparability_family,
    "gpu": lambda r: r.environment.product,
}


def comparability_breaks(a: BenchmarkRun, b: BenchmarkRun) -> list[dict]:
    """Each field of the comparison key on which the two runs differ, with both values."""
    return [
        {"field": label, "a": show(a), "b": show(b)}
        for key, label, show in COMPARABILITY_FIELDS
        if COMPARABILITY_KEYS[key](a) != COMPARABILITY_KEYS[key](b)
    ]


def sources_apart(a: BenchmarkRun, b: BenchmarkRun) -> list[dict] | None:
    """Two runs from two sources: each source and how it measures (its plug-in's words), the
    plain reason such runs are not comparable; None for one source."""
    if a.source_id == b.source_id:
        return None
    return [
        {"name": run.source.name, "how": getattr(sources.plugin_for(run.source.slug), "comparability", "")}
        for run in (a, b)
    ]


@dataclass
class CompareSection:
    title: str
    rows: list[dict] = field(default_factory=list)

    @property
    def differing(self) -> int:
        return sum(row["differs"] for row in self.rows)

    @property
    def differing_rows(self) -> list[dict]:
        return [row for row in self.rows if row["differs"]]

    @property
    def same_rows(self) -> list[dict]:
        return [row for row in self.rows if not row["differs"]]


def _row(label, a, b):
    return {"label": label, "a": a, "b": b, "differs": a != b}


def _display(value) -> str:
    if value is None or value == "" or value == {} or value == []:
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def flatten(document, prefix: str = "") -> dict[str, str]:
    """A JSON document as {dotted.path: value} for a field-by-field comparison."""
    if isinstance(document, dict) and document:
        out = {}
        for key, value in document.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(document, list) and document and any(isinstance(i, dict | list) for i in document):
        out = {}
        for index, value in enumerate(document):
            out.update(flatten(value, f"{prefix}[{index}]"))
        return out
    return {prefix: _display(document)}


def _software_rows(a: dict, b: dict) -> list[dict]:
    """One row per package, by name, rather than the two version documents as JSON."""
    if not a and not b:
        return [_row("Software", "not recorded", "not recorded")]
    return [
        _row(f"Software: {name}", str(a.get(name, "not recorded")), str(b.get(name, "not recorded")))
        for name in sorted(set(a) | set(b))
    ]


def compare_sections(a: BenchmarkRun, b: BenchmarkRun) -> list[CompareSection]:
    identity = CompareSection(
        "Identity",
        [
            _row("Kernel", a.kernel.name, b.kernel.name),
            _row("Implementation", a.implementation.provider, b.implementation.provider),
            _row("Project", a.implementation.project, b.implementation.project),
            _row("Revision", a.implementation.revision or "unknown", b.implementation.revision or "unknown"),
            _row("Timed pass", a.get_operation_mode_display(), b.get_operation_mode_display()),
            _row("Metric", a.get_metric_display(), b.get_metric_display()),
            _row("Observed", a.observed_at.isoformat(), b.observed_at.isoformat()),
            _row("Source", a.source.name, b.source.name),
            _row("Evidence level", a.get_evidence_level_display(), b.get_evidence_level_display()),
            _row("Comparison key", a.comparison_key, b.comparison_key),
            _row("Implementation digest", a.implementation.digest, b.implementation.digest),
        ],
    )
    params = sorted(set(a.workload.parameters) | set(b.workload.parameters))
    workload = CompareSection(
        "Workload",
        [
            _row("Summary", a.workload.summary, b.workload.summary),
            _row("dtype", a.workload.dtype, b.workload.dtype),
        ]
        + [
            _row(name, _display(a.workload.parameters.get(name)), _display(b.workload.parameters.get(name)))
            for name in params
        ]
        + [
            _row(
                "Tensors",
                _tensors(a.workload.tensors),
                _tensors(b.workload.tensors),
            ),
            _row("Workload digest", a.workload.digest, b.workload.digest),
        ],
    )
    protocol = CompareSection(
        "Protocol",
        [
            _row("Name", a.protocol.name, b.protocol.name),
            _row("Harness", a.protocol.harness, b.protocol.harness),
            _row("Timer", a.protocol.timer, b.protocol.timer),
            _row("Statistic", a.protocol.statistic, b.protocol.statistic),
            _row("Comparability family", a.protocol.comparability_family, b.protocol.comparability_family),
            _row("Protocol digest", a.protocol.digest, b.protocol.digest),
        ],
    )
    environment = CompareSection(
        "Environment",
        [
            _row("Vendor", a.environment.vendor, b.environment.vendor),
            _row("Product", a.environment.product, b.environment.product),
            _row("Form factor", a.environment.form_factor, b.environment.form_factor),
            _row("Architecture", a.environment.architecture, b.environment.architecture),
        ]
        + _software_rows(a.environment.software or {}, b.environment.software or {})
        + [_row("Environment digest", a.environment.digest, b.environment.digest)],
    )
    flat_a, flat_b = flatten(a.manifest), flatten(b.manifest)
    manifest = CompareSection(
        "Manifest",
        [
            _row(path, flat_a.get(path, "—"), flat_b.get(path, "—"))
            for path in sorted(set(flat_a) | set(flat_b))
        ],
    )
    return [identity, workload, protocol, environment, manifest]


def _tensors(tensors: list[dict]) -> str:
    if not tensors:
        return "not published"
    return "; ".join(f"{t['name']} {t['dtype']} {t['shape']}" for t in tensors)


# --- the kernel page -------------------------------------------------------------------------


def kernel_filter_choices(kernel: Kernel) -> dict:
    """The values the kernel page's selects offer: only those the kernel's runs have. Read from
    the small tables (implementations, GPU environments, workloads), never by a DISTINCT over the
    kernel's runs: a GPU is offered when an index probe finds one run of the kernel on it."""
    on_kernel = BenchmarkRun.objects.filter(kernel=kernel, environment=OuterRef("pk"))
    labelled = (
        Implementation.objects.filter(kernel=kernel)
        .order_by()
        .values_list(Value("implementation"), "provider", Value(""))
        .union(
            Environment.objects.filter(Exists(on_kernel))
            .order_by()
            .values_list(Value("gpu"), "slug", "product")
        )
    )
    gpus, providers = set(), set()
    for kind, name, product in labelled:
        if kind == "gpu":
            gpus.add((name, product))
        else:
            providers.add(name)
    dtypes: set[str] = set()
    x_names: set[str] = set()
    parameters: dict[str, set] = {}
    labels: dict[str, str] = {}
    workloads = Workload.objects.filter(kernel=kernel).values_list("dtype", "x_name", "x_label", "parameters")
    for dtype, x_name, x_label, values in workloads:
        dtypes.add(dtype)
        x_names.add(x_name)
        if x_label and x_label != x_name:
            labels.setdefault(x_name, x_label)
        for name, value in values.items():
            if isinstance(value, bool) or isinstance(value, dict | list):
                continue
            parameters.setdefault(name, set()).add(value)
    return {
        "gpus": sorted(gpus, key=lambda g: g[1]),
        "implementations": sorted(providers),
        "dtypes": sorted(d for d in dtypes if d),
        "parameters": [
            {
                "name": name,
                # The source's words for a swept parameter ("T" is the sequence length).
                "label": labels.get(name, ""),
                "options": [
                    {"value": value, "option": f"{name}:{value}"}
                    for value in sorted(values, key=lambda v: (isinstance(v, str), v))
                ],
            }
            for name, values in sorted(parameters.items())
            if len(values) > 1
        ],
        "passes": TimedPass.choices,
        "metrics": Metric.choices,
        "levels": EvidenceLevel.choices,
        "x_names": sorted(x_names),  # not a select: the charts' panel candidates
    }


CHART_FIELDS = (
    "environment__slug",
    "environment__product",
    "operation_mode",
    "metric",
    "unit",
    "implementation__provider",
    "workload__x_name",
    "workload__x_label",
    "workload__x_value",
    "workload__parameters",
    "workload__dtype",
    "median",
    "p20",
    "p80",
    "sol_percent",
    "id",
    "protocol__comparability_family",
)


def chart_points(queryset) -> list[dict]:
    """The filtered runs, as plain values for the charts: one query, no pagination."""
    return list(queryset.order_by().values(*CHART_FIELDS))


def chart_panels(queryset, *, kernel: Kernel, x_names: Iterable[str]) -> list[dict]:
    """The chart panels (metric, GPU, pass, swept parameter) that `queryset`'s runs fill, found by
    probing each candidate panel instead of reading the runs: one row per GPU of the kernel, one
    EXISTS per pass, metric and swept parameter, each an index probe (`run_kernel_current_panels`
    for current runs). The work grows with the kernel's GPUs and parameters, not with its runs."""
    queryset = queryset.order_by()
    keys = list(itertools.product(TimedPass.values, Metric.values, sorted(set(x_names))))
    probes = {
        f"panel_{index}": Exists(
            queryset.filter(environment=OuterRef("pk"), operation_mode=mode, metric=metric, x_name=x_name)
        )
        for index, (mode, metric, x_name) in enumerate(keys)
    }
    gpus = Environment.objects.filter(
        Exists(BenchmarkRun.objects.filter(kernel=kernel, environment=OuterRef("pk")))
    )
    panels = {}
    for gpu in gpus.annotate(**probes).values("slug", "product", *probes):
        for index, (mode, metric, x_name) in enumerate(keys):
            if gpu[f"panel_{index}"]:
                panels[(metric, gpu["slug"], mode, x_name)] = {
                    "metric": metric,
                    "environment__slug": gpu["slug"],
                    "environment__product": gpu["product"],
                    "operation_mode": mode,
                    "workload__x_name": x_name,
                }
    return list(panels.values())


def chart_points_drawn(
    queryset,
    *,
    kernel: Kernel,
    order: Callable[[dict], tuple],
    limit: int,
    max_points: int,
    x_names: Iterable[str] | None = None,
) -> tuple[list[dict], int]:
    """The filtered runs of the first `limit` chart panels in `order` (the charts' own: the view
    passes `charts.panel_order`, `charts.MAX_PANELS` and `charts.MAX_CHART_POINTS`), and perhaps
    of a few more on the same GPUs, as plain values; and how many panels were left out.
    Two queries (three without `x_names`, the kernel's swept parameters): the panels
    (`chart_panels`), then the points of the drawn panels' GPUs, so a kernel measured on many
    GPUs does not load every run it has into Python for 24 charts. The points query reads at
    most `max_points + 1` rows: more than that means the selection is over the page's budget,
    and the rows read are not a whole set of panels."""
    if x_names is None:
        x_names = Workload.objects.filter(kernel=kernel).values_list("x_name", flat=True).distinct()
    panels = chart_panels(queryset, kernel=kernel, x_names=x_names)
    drawn = sorted(panels, key=order)[:limit]
    queryset = queryset.order_by()
    if len(drawn) < len(panels):
        # The drawn panels' GPUs and metrics: a superset of their points that PostgreSQL reads
        # faster than an OR of 24 panel keys; panels_build(limit) keeps exactly the drawn ones,
        # since every panel that sorts before a drawn one is itself drawn.
        queryset = queryset.filter(
            environment__slug__in={p["environment__slug"] for p in drawn},
            metric__in={p["metric"] for p in drawn},
        )
    return list(queryset.values(*CHART_FIELDS)[: max_points + 1]), len(panels) - len(drawn)


# --- comparison groups (API) -----------------------------------------------------------------

GROUP_FIELDS = (
    "comparison_key",
    "kernel__slug",
    "operation_mode",
    "metric",
    "unit",
    "environment__slug",
    "environment__product",
    "workload__digest",
    "workload__summary",
    "protocol__comparability_family",
)


def comparison_groups():
    """One row per comparison group of current runs, with its size and best median."""
    return (
        BenchmarkRun.objects.current()
        .values(*GROUP_FIELDS)
        .annotate(size=Count("id"), best=Min("median"), latest=Max("observed_at"))
        .order_by("comparison_key")
    )


# --- search ----------------------------------------------------------------------------------


@dataclass
class SearchResults:
    query: str
    kernels: list = field(default_factory=list)
    implementations: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    runs: object = None
    run_groups: list = field(default_factory=list)


def search_exact_run(query: str) -> BenchmarkRun | None:
    """A digest or an external id names exactly one run: the search goes straight to it."""
    digest = normalise_digest(query)
    lookup = Q(digest=digest) if digest else Q(external_id=query)
    return BenchmarkRun.objects.filter(lookup).only("pk").first()


def search(query: str) -> SearchResults:
    results = SearchResults(query=query)
    if not query:
        return results
    kernels = Q(name__icontains=query) | Q(slug__icontains=query)
    own = sources.kernels_matching(query)  # a source's own names for its kernels (registry/sources/)
    results.kernels = list(Kernel.objects.filter(kernels | own if own is not None else kernels)[:20])
    results.implementations = list(
        Implementation.objects.filter(Q(provider__icontains=query) | Q(project__icontains=query))
        .values("provider", "project")
        .annotate(kernels=Count("kernel", distinct=True))
        .order_by("project", "provider")[:20]
    )
    results.gpus = list(
        Environment.objects.filter(Q(product__icontains=query) | Q(slug__icontains=query))
        .values("slug", "product")
        .distinct()
        .order_by("product")[:20]
    )
    digest_prefix = query.lower().removeprefix("sha256:")
    runs = Q(external_id__icontains=query)
    if re.fullmatch(r"[0-9a-f]{6,64}", digest_prefix):
        runs |= Q(digest__startswith="sha256:" + digest_prefix)
        runs |= Q(workload__digest__startswith="sha256:" + digest_prefix)
        runs |= Q(comparison_key__startswith="sha256:" + digest_prefix)
    matched = public_runs().filter(runs)
    # Latency before memory, then by pass and id: the groups above say how many of each there are.
    results.runs = matched.order_by("kernel__slug", "metric", "operation_mode", "external_id", "id")
    results.run_groups = list(
        matched.values("kernel__slug", "kernel__name", "operation_mode", "metric")
        .annotate(count=Count("id"))
        .order_by("kernel__slug", "metric", "operation_mode")[:60]
    )
    return results


def source_counts() -> list[dict]:
    """Each source's runs, one query: current (listed, not replaced), superseded (replaced by a
    newer value of its key) and withdrawn (no longer listed, not replaced)."""
    rows = Source.objects.order_by("slug").annotate(
        total=Count("runs"),
        current=Count("runs", filter=Q(runs__withdrawn=False, runs__superseded_by__isnull=True)),
        superseded=Count("runs", filter=Q(runs__superseded_by__isnull=False)),
        withdrawn=Count("runs", filter=Q(runs__withdrawn=True, runs__superseded_by__isnull=True)),
    )
    return list(rows.values("slug", "total", "current", "superseded", "withdrawn"))


def controlled_counts() -> list[dict]:
    """KernelIndex's own current runs, by the source whose workload each measures, GPU model and
    implementation: how many, and how many are `reproduced` (an agreeing rerun on another card).
    One query; a run's source is that of another run of its workload."""
    measured_source = (
        BenchmarkRun.objects.filter(workload=OuterRef("workload"))
        .exclude(source__slug=CONTROLLED_SOURCE_SLUG)
        .values("source__slug")[:1]
    )
    rows = (
        BenchmarkRun.objects.current()
        .filter(source__slug=CONTROLLED_SOURCE_SLUG)
        .annotate(measures=Subquery(measured_source))
        .values("measures", "gpu_product", "implementation__provider")
        .annotate(
            current=Count("id"),
            reproduced=Count("id", filter=Q(evidence_level=EvidenceLevel.REPRODUCED)),
        )
        .order_by("measures", "gpu_product", "implementation__provider")
    )
    return list(rows)
