"""The public site: read-only pages over `BenchmarkRun.objects.public()`.

Each view fetches through `registry.selectors`, validates its query string with the same
`RunFilter` the API uses (a bad value is a 400 page naming the parameter), and renders.
"""

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_safe

from registry import (
    baselines,
    charts,
    citations,
    evidence,
    rank_status,
    run_page,
    sampleplot,
    selectors,
)
from registry.filters import RunFilter
from registry.glossary import glossary_entries
from registry.models import BenchmarkRun, Kernel, Source, SourceImport

PAGE_SIZE = 50
SORT_CHOICES = (
    ("", "GPU, pass, implementation"),
    ("median", "median, lowest first"),
    ("-median", "median, highest first"),
    ("rank", "rank in group"),
    ("x", "swept parameter"),
    ("implementation", "implementation"),
    ("gpu", "GPU"),
    ("-observed", "newest observation"),
)
# GPU product, pass, metric, provider, swept value: the run's own copies (services.run_keys), in
# the order of the index `run_kernel_page_order`, so a page reads 50 index entries.
KERNEL_DEFAULT_ORDER = ("gpu_product", "operation_mode", "metric", "provider", "x_value", "id")
RUN_LIST_DEFAULT_ORDER = (
    "kernel__slug",
    "environment__product",
    "implementation__provider",
    "workload__x_value",
    "id",
)


class NarrowPaginator(Paginator):
    """Sorts and slices the runs' ids alone, then reads the page's rows by id, in one query: the
    database sorts narrow tuples (the sort keys and the id), not every matching run with its
    manifest and six joined rows, to keep 50 of them."""

    def _get_page(self, object_list, number, paginator):
        window = object_list.query
        ids = self.object_list.values("pk")[window.low_mark : window.high_mark]
        return super()._get_page(self.object_list.filter(pk__in=ids), number, paginator)


def _paginate(request, queryset, per_page=PAGE_SIZE, paginator=Paginator):
    page = paginator(queryset, per_page).get_page(request.GET.get("page"))
    if queryset.model is BenchmarkRun and hasattr(page.object_list, "annotate"):
        # A host-bound run's figure is labelled wherever a run table shows it (a subquery).
        page.object_list = evidence.with_host_bound(page.object_list)
    return page


def _filtered(request, queryset, default_order):
    """Apply the query string's filters; returns (filterset, page or None, status)."""
    filterset = RunFilter(request.GET, queryset=queryset)
    if not filterset.is_valid():
        return filterset, None, 400
    runs = filterset.qs
    if not request.GET.get("sort"):
        runs = runs.order_by(*default_order)
    return filterset, _paginate(request, runs, paginator=NarrowPaginator), 200


# The kernels the home page lists, those with the most runs: every kernel made the page 533 kB once
# KernelBench's 250 problems arrived; the kernels page lists them all.
HOME_KERNELS = 40


@require_safe
def home(request):
    verified = selectors.runs_recently_verified()
    return render(
        request,
        "registry/home.html",
        {
            "counts": selectors.registry_counts(),
            "kernels": selectors.kernels_overview(most_runs=HOME_KERNELS),
            "recent": selectors.runs_recent(besides=verified),
            "verified": verified,
        },
    )


@require_safe
def run_detail(request, pk=None, digest=None):
    page = run_page.run_page(pk=pk, digest=digest)
    if page is None:
        raise Http404("No run has this id or digest.")
    plot = sampleplot.samples_plot(
        dom_id=f"samples-{page.run.pk}",
        unit=page.run.unit,
        jobs=page.plotted_jobs,
        reference=page.plot_reference,
    )
    return render(request, "registry/run_detail.html", {"page": page, "run": page.run, "sample_plot": plot})


@require_safe
def run_compare_best(request, pk):
    run = selectors.run_for_page(pk=pk)
    if run is None:
        raise Http404("No run has this id.")
    best = selectors.group_best_other(selectors.run_group(run), run)
    if best is None:
        raise Http404("This run is alone in its comparison group.")
    return redirect("registry:compare", a=run.pk, b=best.pk)


@require_safe
def compare(request, a, b):
    run_a = selectors.run_for_page(pk=a)
    run_b = selectors.run_for_page(pk=b)
    if run_a is None or run_b is None:
        raise Http404("No run has this id.")
    change = selectors.change_percent(run_a.median, run_b.median)
    rank_status.attach([run_a, run_b])
    ratio = rank_status.medians_ratio(run_a, run_b) if run_a.median else None
    same_group = run_a.comparison_key == run_b.comparison_key
    return render(
        request,
        "registry/compare.html",
        {
            "a": run_a,
            "b": run_b,
            "change": change,
            "difference": run_b.median - run_a.median,
            "ratio": ratio,
            "in_words": rank_status.compare_in_words(run_a, run_b, ratio, same_group),
            "same_group": same_group,
            "breaks": selectors.comparability_breaks(run_a, run_b),
            "sources_apart": selectors.sources_apart(run_a, run_b),
            "sections": selectors.compare_sections(run_a, run_b),
        },
    )


@require_safe
def compare_form(request):
    """Two runs named by id, digest or external id (`?a=…&b=…`) → their compare page."""
    names = [request.GET.get("a", "").strip(), request.GET.get("b", "").strip()]
    if not any(names):
        return render(request, "registry/compare_form.html", {"error": None})
    pks = [_run_pk(name) for name in names]
    if None in pks:
        error = "Name two runs, each by its id, its digest (sha256:…) or its external id."
        return render(request, "registry/compare_form.html", {"error": error, "names": names}, status=400)
    return redirect("registry:compare", a=pks[0], b=pks[1])


def _run_pk(name: str) -> int | None:
    if "\x00" in name:
        return None
    if name.isascii() and name.isdigit():  # str.isdigit() also takes "¹", which int() refuses
        return int(name) if len(name) < 19 else None
    run = selectors.search_exact_run(name) if name else None
    return run.pk if run else None


def _citation_run(pk):
    run = selectors.run_for_page(pk=pk)
    if run is None:
        raise Http404("No run has this id.")
    return run


@require_safe
def run_cite_bibtex(request, pk):
    run = _citation_run(pk)
    response = HttpResponse(
        citations.bibtex(run, accessed=timezone.now().date()),
        content_type="application/x-bibtex; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{citations.citation_key(run)}.bib"'
    return response


@require_safe
def run_cite_csl(request, pk):
    run = _citation_run(pk)
    response = JsonResponse(
        citations.csl_json(run, accessed=timezone.now().date()),
        safe=False,
        content_type="application/vnd.citationstyles.csl+json",
        json_dumps_params={"indent": 2, "ensure_ascii": False},
    )
    response["Content-Disposition"] = f'attachment; filename="{citations.citation_key(run)}.json"'
    return response


@require_safe
def kernel_list(request):
    return render(request, "registry/kernel_list.html", {"kernels": selectors.kernels_overview()})


@require_safe
def kernel_detail(request, slug):
    kernel = get_object_or_404(Kernel, slug=slug)
    runs = selectors.public_runs().filter(kernel=kernel)
    filterset, page, status = _filtered(request, runs, KERNEL_DEFAULT_ORDER)
    choices = selectors.kernel_filter_choices(kernel)
    # ?chart=sol: the charts in percent of the speed of light instead of time.
    chart = "sol" if request.GET.get("chart") == "sol" else "time"
    panels, omitted, points_over = [], 0, False
    if page is not None:
        page.object_list = rank_status.attach(page.object_list)
        current = (
            filterset.qs if "current" in request.GET or "withdrawn" in request.GET else filterset.qs.current()
        )
        points, omitted = selectors.chart_points_drawn(
            current,
            kernel=kernel,
            x_names=choices["x_names"],
            order=charts.panel_order,
            limit=charts.MAX_PANELS,
            max_points=charts.MAX_CHART_POINTS,
        )
        points_over = len(points) > charts.MAX_CHART_POINTS
        if not points_over:
            if chart == "sol":
                points = charts.as_speed_of_light(points)
            panels, _ = charts.panels_build(points)
    return render(
        request,
        "registry/kernel_detail.html",
        {
            "kernel": kernel,
            "filterset": filterset,
            "page": page,
            "choices": choices,
            "selected_params": request.GET.getlist("param"),
            "panels": panels,
            "omitted_panels": omitted,
            "chart_points_over": f"{charts.MAX_CHART_POINTS:,}" if points_over else "",
            "sort_choices": SORT_CHOICES,
            "chart": chart,
            "baselines": baselines.matrix_of(
                kernel,
                shown=page.object_list if page else [],
                withdrawn=request.GET.get("configurations") == "all",
            ),
        },
        status=status,
    )


@require_safe
def run_list(request):
    """Browse every run, with the API's filters (kernel, implementation, project, GPU, …)."""
    filterset, page, status = _filtered(request, selectors.public_runs(), RUN_LIST_DEFAULT_ORDER)
    return render(request, "registry/run_list.html", {"filterset": filterset, "page": page}, status=status)


@require_safe
def gpu_list(request):
    return render(request, "registry/gpu_list.html", {"gpus": selectors.gpus_overview()})


@require_safe
def gpu_detail(request, slug):
    gpu = selectors.gpu_get(slug)
    if gpu is None:
        raise Http404("No GPU has this name.")
    page = _paginate(
        request, selectors.public_runs().filter(environment__slug=slug).order_by("kernel__slug", "id")
    )
    return render(
        request,
        "registry/gpu_detail.html",
        {"gpu": gpu, "kernels": selectors.gpu_kernels(slug), "page": page},
    )


@require_safe
def implementation_list(request):
    return render(
        request,
        "registry/implementation_list.html",
        {"implementations": selectors.implementations_overview()},
    )


@require_safe
def implementation_detail(request, provider):
    variants = list(selectors.implementation_variants(provider))
    if not variants:
        raise Http404("No implementation has this name.")
    page = _paginate(
        request,
        selectors.public_runs().filter(implementation__provider=provider).order_by("kernel__slug", "id"),
    )
    return render(
        request,
        "registry/implementation_detail.html",
        {"provider": provider, "variants": variants, "page": page},
    )


@require_safe
def source_list(request):
    return render(request, "registry/source_list.html", {"sources": Source.objects.order_by("name")})


@require_safe
def source_detail(request, slug):
    source = get_object_or_404(Source, slug=slug)
    imports = SourceImport.objects.filter(source=source).order_by("-imported_at", "-pk")[:100]
    page = _paginate(request, selectors.public_runs().filter(source=source).order_by("kernel__slug", "id"))
    return render(
        request, "registry/source_detail.html", {"source": source, "imports": imports, "page": page}
    )


@require_safe
def search(request):
    query = request.GET.get("q", "").strip()[:400]
    if "\x00" in query:
        return render(request, "registry/search.html", {"results": None, "query": ""}, status=400)
    exact = selectors.search_exact_run(query) if query else None
    if exact is not None:
        return redirect(exact)
    results = selectors.search(query)
    page = _paginate(request, results.runs) if results.runs is not None else None
    return render(request, "registry/search.html", {"results": results, "query": query, "page": page})


@require_safe
def glossary(request):
    return render(request, "registry/glossary.html", {"entries": glossary_entries()})
