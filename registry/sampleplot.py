"""A controlled run's samples as a small server-side SVG strip plot: one row per job (the
measurement, then each rerun), one mark per sample, the median as a bar and its 95% interval as a
band; the recorded median as a dashed line across the rows.

Like registry/charts.py: no JavaScript, every text escaped, a <title> and <desc> for screen
readers, and a summary table beside it (`SamplePlot.rows`) with the same figures.

Above MAX_SAMPLE_MARKS samples a row is drawn as a histogram of HISTOGRAM_BINS bins instead of
one mark per sample (a budget-stopped job can hold thousands): the row says so, and its
`summarised` flag is set; the raw samples stay in the jobs API.
"""

import math
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from registry.charts import chart_region, significant

MAX_SAMPLE_MARKS = 500
HISTOGRAM_BINS = 60
WIDTH = 640
LEFT, RIGHT, TOP = 150, 18, 22
ROW_HEIGHT, AXIS_HEIGHT = 46, 40
MARK = "#0072B2"
INTERVAL = "#E69F00"


@dataclass
class PlotRow:
    label: str
    samples: list[float]
    median: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def count(self) -> int:
        return len(self.samples)

    beyond: tuple[int, int] = (0, 0)  # samples left of and right of the drawn range (set by render)

    @property
    def summarised(self) -> bool:
        return self.count > MAX_SAMPLE_MARKS

    @property
    def stats(self) -> dict:
        ordered = sorted(self.samples)
        return {
            "min": ordered[0] if ordered else None,
            "p20": quantile(ordered, 0.2),
            "p80": quantile(ordered, 0.8),
            "max": ordered[-1] if ordered else None,
        }


def quantile(ordered: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default)."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def figure(value: float | None) -> str:
    return "—" if value is None else significant(value, 4)


@dataclass
class SamplePlot:
    dom_id: str
    unit: str
    rows: list[PlotRow]
    reference: float | None = None
    reference_label: str = "recorded median"
    cap: int = MAX_SAMPLE_MARKS

    @property
    def title(self) -> str:
        total = sum(row.count for row in self.rows)
        return f"{total:,} samples in {len(self.rows)} job{'' if len(self.rows) == 1 else 's'} ({self.unit})"

    @property
    def description(self) -> str:
        parts = []
        for row in self.rows:
            stats = row.stats
            part = f"{row.label}: {row.count:,} samples from {figure(stats['min'])} to {figure(stats['max'])} {self.unit}"
            if row.median is not None:
                part += f", median {figure(row.median)}"
            if row.ci_low is not None and row.ci_high is not None:
                part += f" (95% interval {figure(row.ci_low)} to {figure(row.ci_high)})"
            if sum(row.beyond):
                part += f", {sum(row.beyond):,} of them beyond the drawn range (marked on its edge)"
            if row.summarised:
                part += f", drawn as a histogram of {HISTOGRAM_BINS} bins"
            parts.append(part)
        if self.reference is not None:
            parts.append(f"{self.reference_label} {figure(self.reference)} {self.unit}, a dashed line")
        return "; ".join(parts) + "."

    @property
    def drawable(self) -> bool:
        return any(row.samples for row in self.rows)

    @property
    def svg(self) -> SafeString:
        return render(self) if self.drawable else mark_safe("")


def samples_plot(
    *, dom_id: str, unit: str, jobs, reference: float | None = None, max_rows: int = 8
) -> SamplePlot | None:
    """The plot of `jobs`' samples, `max_rows` rows at most (each job with its `label`, `samples`,
    `median`, `ci_low` and `ci_high`: registry.evidence.JobEvidence); None when none has samples.
    `reference`: a recorded median to draw as the dashed line."""
    rows = [
        PlotRow(
            label=job.label, samples=job.samples, median=job.median, ci_low=job.ci_low, ci_high=job.ci_high
        )
        for job in jobs
        if job.samples
    ][:max_rows]
    return SamplePlot(dom_id=dom_id, unit=unit, rows=rows, reference=reference) if rows else None


def _domain(plot: SamplePlot) -> tuple[float, float]:
    """The samples' range, cut at Tukey's far-out fences (3 interquartile ranges beyond the
    quartiles) so that one slow call does not squeeze the rest into a line: samples beyond a
    fence are drawn on the edge as triangles and counted (`PlotRow.beyond`). The medians, their
    intervals and the reference line are always inside."""
    samples = sorted(v for row in plot.rows for v in row.samples)
    q1, q3 = quantile(samples, 0.25), quantile(samples, 0.75)
    spread = 3 * (q3 - q1)
    low = max(samples[0], q1 - spread) if spread else samples[0]
    high = min(samples[-1], q3 + spread) if spread else samples[-1]
    marks = [v for row in plot.rows for v in (row.median, row.ci_low, row.ci_high) if v is not None]
    if plot.reference is not None:
        marks.append(plot.reference)
    low, high = min([low, *marks]), max([high, *marks])
    pad = (high - low) * 0.05 or abs(high) * 0.01 or 1.0
    return low - pad, high + pad


def _ticks(low: float, high: float) -> list[float]:
    raw = (high - low) / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next((m * power for m in (1, 2, 2.5, 5, 10) if raw <= m * power), 10 * power)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def render(plot: SamplePlot) -> SafeString:
    low, high = _domain(plot)
    for row in plot.rows:
        row.beyond = (sum(v < low for v in row.samples), sum(v > high for v in row.samples))
    plot_width = WIDTH - LEFT - RIGHT

    def x_of(value: float) -> float:
        return LEFT + (value - low) / (high - low) * plot_width

    height = TOP + ROW_HEIGHT * len(plot.rows) + AXIS_HEIGHT
    axis_y = TOP + ROW_HEIGHT * len(plot.rows)
    dom_id = escape(plot.dom_id)
    out = [
        f'<svg class="chart sample-plot" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{dom_id}-title {dom_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{dom_id}-title">{escape(plot.title)}</title>',
        f'<desc id="{dom_id}-desc">{escape(plot.description)}</desc>',
        '<g class="grid" aria-hidden="true">',
    ]
    for tick in _ticks(low, high):
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{axis_y}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle">{escape(significant(tick, 4))}</text>'
        )
    out.append(
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis_y}" y2="{axis_y}"/>'
        f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        f"one sample: one timed call ({escape(plot.unit)})</text></g>"
    )
    for index, row in enumerate(plot.rows):
        out.append(_row_svg(row, TOP + ROW_HEIGHT * index, x_of, plot.unit, (low, high)))
    if plot.reference is not None:
        tip = f"{plot.reference_label}: {figure(plot.reference)} {plot.unit}"
        line = _vertical(x_of(plot.reference), TOP - 6, axis_y, tip, width=1.2, dash="5 3")
        out.append(f'<g class="reference">{line}</g>')
    out.append("</svg>")
    return chart_region("".join(out), f"Chart: {plot.title}")


def _vertical(
    x: float, y1: float, y2: float, tip: str, *, width: float, dash: str = "", css: str = ""
) -> str:
    """A vertical black line across the plot with its value as a tooltip."""
    attributes = (f' class="{css}"' if css else "") + (f' stroke-dasharray="{dash}"' if dash else "")
    return (
        f'<line{attributes} x1="{x:.1f}" x2="{x:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" stroke="#000" '
        f'stroke-width="{width}"><title>{escape(tip)}</title></line>'
    )


def _row_svg(row: PlotRow, top: float, x_of, unit: str, bounds: tuple[float, float]) -> str:
    middle = top + ROW_HEIGHT / 2
    out = [
        f'<g class="sample-row" data-samples="{row.count}">',
        f'<text class="label" x="{LEFT - 8}" y="{middle + 4:.1f}" text-anchor="end">{escape(row.label)}</text>',
    ]
    if row.ci_low is not None and row.ci_high is not None:
        x1, x2 = x_of(row.ci_low), x_of(row.ci_high)
        tip = f"95% interval of the median: {figure(row.ci_low)} to {figure(row.ci_high)} {unit}"
        out.append(
            f'<rect class="interval" x="{x1:.1f}" y="{top + 4:.1f}" width="{max(x2 - x1, 1.5):.1f}" '
            f'height="{ROW_HEIGHT - 8}" fill="{INTERVAL}" fill-opacity="0.3"><title>{escape(tip)}</title></rect>'
        )
    out.append(_histogram(row, top, x_of, bounds) if row.summarised else _marks(row, middle, x_of, bounds))
    for side, count, value in ((0, row.beyond[0], row.stats["min"]), (1, row.beyond[1], row.stats["max"])):
        if count:
            x = x_of(bounds[side])
            tip = f"{count:,} sample{'' if count == 1 else 's'} beyond the drawn range, out to {figure(value)} {unit}"
            sign = 1 if side else -1
            out.append(
                f'<g class="beyond"><path d="M{x + 5 * sign:.1f} {middle:.1f}L{x - 2 * sign:.1f} {middle - 6:.1f}'
                f'L{x - 2 * sign:.1f} {middle + 6:.1f}Z" fill="#D55E00"/><text class="tick" x="{x - 6 * sign:.1f}" '
                f'y="{middle - 9:.1f}" text-anchor="{"end" if side else "start"}">{count:,} ›</text>'
                f"<title>{escape(tip)}</title></g>"
            )
    if row.median is not None:
        tip = f"median {figure(row.median)} {unit}"
        out.append(_vertical(x_of(row.median), top + 2, top + ROW_HEIGHT - 2, tip, width=2.5, css="median"))
    out.append("</g>")
    return "".join(out)


def _marks(row: PlotRow, middle: float, x_of, bounds: tuple[float, float]) -> str:
    """One circle per sample, spread vertically by a fixed sequence (no randomness: the same
    samples draw the same picture); a sample beyond the drawn range sits on its edge."""
    marks = []
    for index, value in enumerate(row.samples):
        y = middle + ((index * 0.618034) % 1 - 0.5) * (ROW_HEIGHT - 16)
        x = x_of(min(max(value, bounds[0]), bounds[1]))
        marks.append(
            f'<circle class="sample" cx="{x:.1f}" cy="{y:.1f}" r="2.4" fill="{MARK}" fill-opacity="0.5"/>'
        )
    return "".join(marks)


def _histogram(row: PlotRow, top: float, x_of, bounds: tuple[float, float]) -> str:
    """Bins over the drawn range; the samples beyond it are counted by the edge triangles."""
    inside = [v for v in row.samples if bounds[0] <= v <= bounds[1]] or row.samples
    low, high = min(inside), max(inside)
    width = (high - low) / HISTOGRAM_BINS or 1.0
    counts = [0] * HISTOGRAM_BINS
    for value in inside:
        counts[min(int((value - low) / width), HISTOGRAM_BINS - 1)] += 1
    tallest = max(counts)
    bars = []
    for index, count in enumerate(counts):
        if not count:
            continue
        x1, x2 = x_of(low + index * width), x_of(low + (index + 1) * width)
        bar = (ROW_HEIGHT - 10) * count / tallest
        bars.append(
            f'<rect class="bin" x="{x1:.1f}" y="{top + ROW_HEIGHT - 5 - bar:.1f}" width="{max(x2 - x1, 1):.1f}" '
            f'height="{bar:.1f}" fill="{MARK}" fill-opacity="0.6"><title>{count:,} samples</title></rect>'
        )
    return "".join(bars)
