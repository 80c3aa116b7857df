"""A series: one measurement over time (same kernel, implementation, pass, metric, workload,
protocol family and GPU: one comparison group and one provider), every value ever published,
oldest first. The run page shows it; the changes between its consecutive values are
registry.services.changes's."""

from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from registry.charts import chart_region
from registry.models import BenchmarkRun

WIDTH, HEIGHT, PAD_X, PAD_Y = 560, 150, 56, 16


def series_runs(*, comparison_key: str, provider: str):
    """Every run of one series, oldest first, with the upstream version that published each."""
    return (
        BenchmarkRun.objects.filter(comparison_key=comparison_key, provider=provider)
        .select_related("origin", "origin__source")
        .order_by("observed_at", "pk")
    )


@dataclass
class SeriesPoint:
    run: BenchmarkRun
    x: float
    y: float
    y_low: float  # p80's height (higher value, lower on the chart)
    y_high: float

    @property
    def status(self) -> str:
        if self.run.superseded_by_id:
            return "superseded"
        return "withdrawn" if self.run.withdrawn else "current"


@dataclass
class Series:
    run: BenchmarkRun
    points: list[SeriesPoint]

    @property
    def this(self) -> SeriesPoint:
        return next(p for p in self.points if p.run.pk == self.run.pk)

    @property
    def current(self) -> BenchmarkRun | None:
        return next((p.run for p in reversed(self.points) if p.status == "current"), None)

    @property
    def svg(self) -> SafeString:
        """Medians joined by a line, each with its p20–p80 band; each point links to its run."""
        line = " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)
        marks = format_html_join(
            "",
            '<g class="point"><title>{}</title>'
            '<rect x="{}" y="{}" width="8" height="{}" fill="#9ecae1" opacity=".6"></rect>'
            '<circle cx="{}" cy="{}" r="{}" fill="{}" stroke="#08519c"></circle></g>',
            (
                (
                    f"{p.run.observed_at:%Y-%m-%d}: median {p.run.median:.4g} {p.run.unit} "
                    f"(p20 {p.run.p20:.4g}, p80 {p.run.p80:.4g}), {p.status}",
                    f"{p.x - 4:.1f}",
                    f"{p.y_low:.1f}",
                    f"{max(p.y_high - p.y_low, 1):.1f}",
                    f"{p.x:.1f}",
                    f"{p.y:.1f}",
                    6 if p.run.pk == self.run.pk else 4,
                    "#08519c" if p.run.pk == self.run.pk else "#fff",
                )
                for p in self.points
            ),
        )
        low, high = self._range()
        return chart_region(
            format_html(
                '<svg class="chart series-chart" viewBox="0 0 {w} {h}" role="img" aria-label="{label}">'
                '<g class="grid"><line class="axis" x1="{px}" y1="{b}" x2="{r}" y2="{b}"></line></g>'
                '<text x="4" y="{ty}">{high}</text><text x="4" y="{b}">{low}</text>'
                '<polyline points="{line}" fill="none" stroke="#08519c"></polyline>{marks}</svg>',
                w=WIDTH,
                h=HEIGHT,
                label=f"{len(self.points)} published values of this measurement, {self.run.unit}",
                px=PAD_X,
                b=HEIGHT - PAD_Y,
                r=WIDTH - 8,
                ty=PAD_Y,
                high=f"{high:.4g}",
                low=f"{low:.4g}",
                line=line,
                marks=marks,
            ),
            f"Chart: {len(self.points)} published values of this measurement",
        )

    def _range(self) -> tuple[float, float]:
        runs = [p.run for p in self.points]
        return _value_range(runs)


def _value_range(runs) -> tuple[float, float]:
    low, high = min(r.p20 for r in runs), max(r.p80 for r in runs)
    margin = (high - low) * 0.1 or abs(high) * 0.02 or 1.0
    return max(low - margin, 0.0), high + margin


def series_of(run: BenchmarkRun) -> Series:
    """The series `run` belongs to, laid out for the run page's chart (one query)."""
    runs = list(series_runs(comparison_key=run.comparison_key, provider=run.provider))
    low, high = _value_range(runs)
    first, last = runs[0].observed_at.timestamp(), runs[-1].observed_at.timestamp()
    span = last - first

    def x(r):
        if len(runs) == 1 or not span:
            return PAD_X + (WIDTH - PAD_X - 16) * (runs.index(r) + 1) / (len(runs) + 1)
        return PAD_X + 8 + (WIDTH - PAD_X - 32) * (r.observed_at.timestamp() - first) / span

    def y(value):
        return PAD_Y + (HEIGHT - 2 * PAD_Y) * (high - value) / (high - low)

    return Series(run=run, points=[SeriesPoint(r, x(r), y(r.median), y(r.p80), y(r.p20)) for r in runs])
