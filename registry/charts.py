"""Server-side SVG charts for the kernel page: median against the swept parameter, with the
p20–p80 band, one line per implementation, one panel per GPU and timed pass.

No JavaScript and no third-party assets: each panel is a small, self-contained `<svg>` with a
title and a description for screen readers, native `<title>` tooltips on its points, and a data
table beside it (the table is the fallback, and the figures a screen reader can step through).
"""

import json
import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from django.urls import get_script_prefix, reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C6D1F")
MARKERS = ("circle", "square", "triangle", "diamond")
DASHES = ("", "6 3", "2 3")
PASS_ORDER = {"forward": 0, "backward": 1, "full": 2}
METRIC_ORDER = {"latency": 0, "memory": 1}
WIDTH, HEIGHT = 640, 340
LEFT, RIGHT, TOP, BOTTOM = 70, 18, 16, 52
MAX_PANELS = 24
# The most chart points one kernel page reads and draws. Panels are drawn whole or not at all: a
# selection over this budget draws no chart and asks the reader to narrow it, rather than thinning
# the points (the page is read as the record of what was measured). The largest kernel of the
# synthetic 1,000,000-run registry draws 1,542 points (docs/performance.md); this bounds the query
# and the page in any data.
MAX_CHART_POINTS = 10_000


def significant(value: float, digits: int = 4) -> str:
    """`digits` significant figures, no exponent, thousands separated: 144.2, 12,261, 0.01234."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value))) + 1
    decimals = max(0, digits - magnitude)
    return f"{value:,.{decimals}f}"


def measure(value: float) -> str:
    """A measured value as tables show it: two decimals (141.29), four figures below 1."""
    if value is None or not math.isfinite(value):
        return "—"
    if abs(value) < 1:
        return significant(value, 4)
    return f"{value:,.2f}"


@lru_cache(maxsize=8)
def _run_path_template(script_prefix: str) -> str:
    return reverse("registry:run-detail", args=[RUN_PK_PLACEHOLDER])


RUN_PK_PLACEHOLDER = 987654321


def run_path(pk: int) -> str:
    """A run page's path. A large kernel page links a thousand points or more; reversing the
    URL once per script prefix instead of once per point saved most of its render time."""
    return _run_path_template(get_script_prefix()).replace(str(RUN_PK_PLACEHOLDER), str(pk))


@dataclass
class Point:
    x: float | str
    median: float
    p20: float
    p80: float
    run_id: int

    @property
    def href(self) -> str:
        return run_path(self.run_id)


@dataclass
class Series:
    label: str
    color: str
    marker: str
    dash: str
    points: list[Point] = field(default_factory=list)


@dataclass
class Panel:
    key: tuple
    title: str
    metric: str
    unit: str
    gpu: str
    operation_mode: str
    x_label: str
    series: list[Series] = field(default_factory=list)
    categorical: bool = False

    @property
    def dom_id(self) -> str:
        return "chart-" + "-".join(str(part) for part in self.key[:4]).replace(" ", "-").lower()

    @cached_property
    def x_values(self) -> list:
        """(Read once the series are complete: panels are built whole in `_panel`.)"""
        values = {p.x for s in self.series for p in s.points}
        return sorted(values, key=str) if self.categorical else sorted(values)

    @property
    def table(self) -> list[dict]:
        """Rows of the fallback table: one per x value, one cell per series (None where a series
        has no point there)."""
        by_x = [{p.x: p for p in series.points} for series in self.series]
        return [{"x": _tick(x), "cells": [points.get(x) for points in by_x]} for x in self.x_values]

    @property
    def table_body(self) -> SafeString:
        """The fallback table's rows as HTML. Built here like the SVG rather than in the template:
        a large kernel page has thousands of cells, and the template engine spent most of the
        page's render time on them. Its cells are styled by the table's class (`chart-data`), not
        each by its own: the largest kernel page has hundreds."""
        rows = []
        for row in self.table:
            cells = "".join(
                f'<td><a href="{cell.href}">{escape(measure(cell.median))}</a> '
                f"<small>[{escape(measure(cell.p20))}–{escape(measure(cell.p80))}]</small></td>"
                if cell
                else "<td>—</td>"
                for cell in row["cells"]
            )
            rows.append(f'<tr><th scope="row">{escape(row["x"])}</th>{cells}</tr>')
        return mark_safe("".join(rows))

    @property
    def description(self) -> str:
        parts = []
        for series in self.series:
            first, last = series.points[0], series.points[-1]
            parts.append(
                f"{series.label}: {measure(first.median)} {self.unit} at {_tick(first.x)}"
                + (f" to {measure(last.median)} {self.unit} at {_tick(last.x)}" if last is not first else "")
            )
        return (
            f"Median {self.metric} in {self.unit} against {self.x_label}, with the p20 to p80 band; "
            + "; ".join(parts)
            + "."
        )

    @property
    def svg(self) -> SafeString:
        return render_svg(self)


def _y_tick(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else significant(value, 3)


def _tick(value) -> str:
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:g}"


def panel_order(panel: dict) -> tuple:
    """Where a panel stands on the page: latency before memory, then GPU, timed pass and swept
    parameter. `panel` is one of its points (selectors.chart_points) or a selectors.chart_panels
    entry, which name these alike; selectors.chart_points_drawn reads only the panels that sort
    first in this order."""
    return (
        METRIC_ORDER.get(panel["metric"], 9),
        panel["environment__product"],
        PASS_ORDER.get(panel["operation_mode"], 9),
        panel["workload__x_name"],
    )


SOL_UNIT = "% of speed of light"


def as_speed_of_light(points: list[dict]) -> list[dict]:
    """Chart points as percentages of the speed of light instead of times (registry.speed_of_light:
    floor / measured, so the band's ends swap: p80's time gives the lower percentage). Runs
    without a percentage (a kernel or pass not counted, a GPU without ceilings) are left out."""
    drawn = []
    for row in points:
        percent = row.get("sol_percent")
        if percent is None or row["p20"] <= 0 or row["p80"] <= 0:
            continue
        scale = percent * row["median"]
        drawn.append(
            {**row, "unit": SOL_UNIT, "median": percent, "p20": scale / row["p80"], "p80": scale / row["p20"]}
        )
    return drawn


def panels_build(points: list[dict], *, limit: int = MAX_PANELS) -> tuple[list[Panel], int]:
    """Group chart points (selectors.chart_points rows) into panels; returns the panels and how
    many were left out beyond `limit`."""
    grouped: dict[tuple, dict] = {}
    for row in points:
        x_name = row["workload__x_name"]
        key = (row["metric"], row["environment__slug"], row["operation_mode"], x_name)
        grouped.setdefault(key, {"rows": []})["rows"].append(row)
    ordered = sorted(grouped.items(), key=lambda item: panel_order(item[1]["rows"][0]))
    panels = [_panel(key, group) for key, group in ordered[:limit]]
    return panels, max(0, len(ordered) - limit)


def _fixed(row: dict) -> dict:
    """The workload's settings other than the swept parameter, dtype included."""
    fixed = {k: v for k, v in row["workload__parameters"].items() if k != row["workload__x_name"]}
    return {**fixed, "dtype": row["workload__dtype"]}


def _varying(rows: list[dict]) -> list[str]:
    """The fixed settings that differ between the panel's sweeps: those name its lines."""
    seen: dict[str, set] = {}
    for row in rows:
        for name, value in _fixed(row).items():
            seen.setdefault(name, set()).add(json.dumps(value, sort_keys=True, default=str))
    keys = set().union(*(_fixed(row).keys() for row in rows)) if rows else set()
    return sorted(
        name for name in keys if len(seen.get(name, ())) > 1 or any(name not in _fixed(row) for row in rows)
    )


def _panel(key: tuple, group: dict) -> Panel:
    rows = group["rows"]
    first = rows[0]
    categorical = any(r["workload__x_value"] is None for r in rows)
    varying = _varying(rows)
    metric_label = "latency" if first["metric"] == "latency" else "peak memory"
    panel = Panel(
        key=key,
        title=f"{first['environment__product']} · {first['operation_mode']} · {metric_label}",
        metric=metric_label,
        unit=first["unit"],
        gpu=first["environment__product"],
        operation_mode=first["operation_mode"],
        x_label=first["workload__x_label"] or first["workload__x_name"],
        categorical=categorical,
    )
    # Runs of different comparability families (the source's timer, KernelIndex's protocols) are
    # never comparable: each family gets its own lines, or a controlled run and the source's run
    # of the same workload would share a point and one would hide the other.
    families = {row.get("protocol__comparability_family", "") for row in rows}
    by_series: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        label = row["implementation__provider"]
        if varying:
            fixed = _fixed(row)
            label += " (" + ", ".join(f"{name} {fixed.get(name, '—')}" for name in varying) + ")"
        if len(families) > 1:
            label += f" · {row['protocol__comparability_family']}"
        x = (
            str(row["workload__parameters"].get(row["workload__x_name"]))
            if categorical
            else row["workload__x_value"]
        )
        # A later run at the same x (a newer import) replaces the earlier one.
        by_series.setdefault(label, {})[x] = Point(x, row["median"], row["p20"], row["p80"], row["id"])
    for index, (label, points) in enumerate(sorted(by_series.items())):
        panel.series.append(
            Series(
                label=label,
                color=COLORS[index % len(COLORS)],
                marker=MARKERS[index % len(MARKERS)],
                dash=DASHES[(index // len(COLORS)) % len(DASHES)],
                points=sorted(points.values(), key=lambda p: str(p.x) if categorical else p.x),
            )
        )
    return panel


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * power:
            return multiple * power
    return 10 * power


def _x_scale(panel: Panel):
    values = panel.x_values
    plot_width = WIDTH - LEFT - RIGHT
    if panel.categorical or len(values) == 1:
        step = plot_width / max(len(values), 1)
        positions = {v: LEFT + step * (i + 0.5) for i, v in enumerate(values)}
        return (lambda v: positions[v]), values
    low, high = values[0], values[-1]
    use_log = low > 0 and high / low >= 8
    transform = math.log2 if use_log else float
    t_low, t_high = transform(low), transform(high)
    pad = (t_high - t_low) * 0.04

    def scale(v):
        return LEFT + (transform(v) - t_low + pad) / (t_high - t_low + 2 * pad) * plot_width

    ticks = values if len(values) <= 9 else values[:: math.ceil(len(values) / 9)]
    return scale, ticks


def _y_scale(panel: Panel):
    top = max(p.p80 for s in panel.series for p in s.points) or 1.0
    step = _nice_step(top)
    y_max = math.ceil(top / step) * step
    plot_height = HEIGHT - TOP - BOTTOM

    def scale(v):
        return TOP + plot_height - (v / y_max) * plot_height

    ticks = [step * i for i in range(int(round(y_max / step)) + 1)]
    return scale, ticks


def _marker(shape: str, x: float, y: float, color: str | None = None, title: str = "") -> str:
    """A point's marker; without `color` it takes the fill of its series' group. A `title` (the
    tooltip, already escaped) goes inside the marker itself: no wrapping group per point."""
    fill = f' fill="{color}"' if color else ""
    if shape == "square":
        head = f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7"{fill}'
        tag = "rect"
    elif shape == "triangle":
        head = (
            f'<path d="M{x:.1f} {y - 4.5:.1f}L{x + 4.5:.1f} {y + 3.5:.1f}L{x - 4.5:.1f} {y + 3.5:.1f}Z"{fill}'
        )
        tag = "path"
    elif shape == "diamond":
        head = f'<path d="M{x:.1f} {y - 5:.1f}L{x + 5:.1f} {y:.1f}L{x:.1f} {y + 5:.1f}L{x - 5:.1f} {y:.1f}Z"{fill}'
        tag = "path"
    else:
        head = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4"{fill}'
        tag = "circle"
    return f"{head}><title>{title}</title></{tag}>" if title else f"{head}/>"


def legend_swatch(series: Series) -> SafeString:
    """The series' line and marker, for the HTML legend beside the chart."""
    dash = f' stroke-dasharray="{series.dash}"' if series.dash else ""
    return mark_safe(
        '<svg class="swatch" width="28" height="12" viewBox="0 0 28 12" aria-hidden="true">'
        f'<line x1="1" y1="6" x2="27" y2="6" stroke="{series.color}" stroke-width="2.5"{dash}/>'
        f"{_marker(series.marker, 14, 6, series.color)}</svg>"
    )


def chart_region(svg: str, label: str) -> SafeString:
    """A chart is one stop for the keyboard: a focusable region holding the picture (role=img, so
    nothing inside it is focusable; its points' links are in the data table beside it). On a
    narrow screen the region scrolls sideways rather than shrinking the chart's text below 11 px
    (static/css/site.css, `.chart-region`)."""
    return mark_safe(
        f'<div class="chart-region" tabindex="0" role="group" aria-label="{escape(label)}">{svg}</div>'
    )


def render_svg(panel: Panel) -> SafeString:
    x_of, x_ticks = _x_scale(panel)
    y_of, y_ticks = _y_scale(panel)
    dom_id = escape(panel.dom_id)
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{dom_id}-title {dom_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{dom_id}-title">{escape(panel.title)}</title>',
        f'<desc id="{dom_id}-desc">{escape(panel.description)}</desc>',
        '<g class="grid" aria-hidden="true">',
    ]
    for tick in y_ticks:
        y = y_of(tick)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(_y_tick(tick))}</text>'
        )
    for tick in x_ticks:
        x = x_of(tick)
        out.append(
            f'<line class="xtick" x1="{x:.1f}" x2="{x:.1f}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM + 5}"/>'
        )
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{escape(_tick(tick))}</text>'
        )
    out.append(
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM}"/>'
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"/>'
        f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 10}" text-anchor="middle">{escape(panel.x_label)}</text>'
        f'<text class="label" transform="translate(16 {(TOP + HEIGHT - BOTTOM) / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"median {escape(panel.metric)} ({escape(panel.unit)})</text></g>"
    )
    for series in panel.series:
        out.append(_series_svg(series, panel, x_of, y_of))
    out.append("</svg>")
    return chart_region("".join(out), f"Chart: {panel.title}")


def _series_svg(series: Series, panel: Panel, x_of, y_of) -> str:
    color = series.color
    label = escape(series.label)
    upper = [(x_of(p.x), y_of(p.p80)) for p in series.points]
    lower = [(x_of(p.x), y_of(p.p20)) for p in reversed(series.points)]
    band = " ".join(f"{x:.1f},{y:.1f}" for x, y in upper + lower)
    line = " ".join(f"{x_of(p.x):.1f},{y_of(p.median):.1f}" for p in series.points)
    dash = f' stroke-dasharray="{series.dash}"' if series.dash else ""
    # The group's fill is its markers' and band's: each point names no colour of its own (the
    # largest kernel page draws hundreds; docs/performance.md, "Steady under sustained load").
    out = [
        f'<g class="series" data-series="{label}" fill="{color}">',
        f'<polygon class="series-band" points="{band}" fill-opacity="0.18"/>',
        f'<polyline class="series-line" points="{line}" fill="none" stroke="{color}" stroke-width="2.5"{dash}/>',
    ]
    for p in series.points:
        tip = (
            f"{series.label}, {panel.x_label} {_tick(p.x)}: median {measure(p.median)} {panel.unit} "
            f"(p20 {measure(p.p20)}, p80 {measure(p.p80)})"
        )
        out.append(_marker(series.marker, x_of(p.x), y_of(p.median), title=escape(tip)))
    out.append("</g>")
    return "".join(out)
