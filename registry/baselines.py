"""A kernel's implementations against a baseline implementation, per GPU: for a source whose
plug-in names one (`SourcePlugin.baseline_provider`; KernelBench's is PyTorch eager), the problem
page shows each configuration's speed-up over the baseline on each GPU, as a table and a chart.

Only current runs, and only within one comparison group (one workload, one GPU product) and one
host of the source: a speed-up compares two figures the source timed the same way. Each speed-up
carries whether the two runs' rank intervals overlap (rank_status), so noise is not called a gain.
"""

from dataclasses import dataclass, field

from registry import rank_status
from registry.models import BenchmarkRun, Kernel
from registry.sources import plugins


@dataclass
class Cell:
    run: BenchmarkRun
    speedup: float | None  # baseline / this, of the primary statistics (>1: faster than the baseline)
    within_noise: bool


@dataclass
class Row:
    gpu: str
    host: str
    baseline: BenchmarkRun | None
    workload: str = ""  # the workload's slug (a problem file's version)
    withdrawn: bool = False
    cells: dict = field(default_factory=dict)  # provider -> Cell


BAR_HEIGHT, LABEL_WIDTH, BAR_SPACE = 18, 330, 260  # the chart's geometry, in SVG units


@dataclass
class Matrix:
    baseline_provider: str
    providers: list
    rows: list
    withdrawn: bool = False

    @property
    def chart(self) -> dict:
        """The chart's bars: one per (row, configuration) with a speed-up, scaled to the largest,
        each with its place; and where 1× (the baseline) falls."""
        bars = [
            {"row": row, "provider": provider, "cell": cell}
            for row in self.rows
            for provider, cell in row.cells.items()
            if cell.speedup is not None and provider != self.baseline_provider
        ]
        largest = max([b["cell"].speedup for b in bars] + [1.0])
        for index, bar in enumerate(bars):
            width = BAR_SPACE * bar["cell"].speedup / largest
            bar.update(
                y=index * BAR_HEIGHT,
                x=LABEL_WIDTH,
                width=round(width, 1),
                label_x=round(LABEL_WIDTH + width + 4, 1),
            )
        return {
            "bars": bars,
            "height": (len(bars) + 1) * BAR_HEIGHT,
            "one_x": round(LABEL_WIDTH + BAR_SPACE / largest, 1),
            "bars_bottom": len(bars) * BAR_HEIGHT,
        }

    @property
    def table(self) -> list[tuple]:
        """(row, [cell or None per provider, in `providers` order])."""
        return [(row, [row.cells.get(p) for p in self.providers]) for row in self.rows]


def matrix_of(kernel: Kernel, *, shown: list, withdrawn: bool = False) -> Matrix | None:
    """For the kernel's runs of the first source among the runs the page already holds (`shown`)
    whose plug-in names a baseline; no query when none does. Current runs; with `withdrawn`, also the
    last value of every key the source no longer lists (the GPUs and configurations it once
    published)."""
    baselines = {p.slug: p.baseline_provider for p in plugins() if p.baseline_provider}
    source = next((run.source.slug for run in shown if run.source.slug in baselines), None)
    if source is None:
        return None
    baseline = baselines[source]
    runs = BenchmarkRun.objects.public().filter(kernel=kernel, source__slug=source)
    runs = runs.filter(superseded_by__isnull=True) if withdrawn else runs.current()
    runs = list(runs.order_by("gpu_product", "provider", "pk"))
    rank_status.attach(runs)
    rows: dict[tuple, Row] = {}
    for run in runs:
        key = (run.gpu_product, run.labels.get("host", ""), run.comparison_key, run.withdrawn)
        row = rows.setdefault(
            key,
            Row(
                gpu=run.gpu_product,
                host=key[1],
                baseline=None,
                workload=run.workload.slug,
                withdrawn=run.withdrawn,
            ),
        )
        row.cells[run.provider] = Cell(run=run, speedup=None, within_noise=False)
        if run.provider == baseline:
            row.baseline = run
    providers = sorted({p for row in rows.values() for p in row.cells}, key=lambda p: (p != baseline, p))
    for row in rows.values():
        for cell in row.cells.values():
            if row.baseline is not None and cell.run.median > 0:
                cell.speedup = row.baseline.median / cell.run.median
                a, b = row.baseline.standing.spread, cell.run.standing.spread
                cell.within_noise = not a.single and not b.single and a.overlaps(b)
    ordered = sorted(rows.values(), key=lambda r: (r.withdrawn, r.gpu, r.host, r.workload))
    return Matrix(baseline_provider=baseline, providers=providers, rows=ordered, withdrawn=withdrawn)
