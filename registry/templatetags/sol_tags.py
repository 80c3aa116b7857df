"""How the speed-of-light figures read on a page (registry/speed_of_light.py computes them)."""

from django import template

register = template.Library()
PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


@register.filter
def si(value, unit=""):
    """A count with an SI prefix, four significant figures (2.148 GB, 35.46 TFLOP)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    for scale, prefix in PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}".strip()


@register.filter
def sol_pct(value):
    """A percentage of the speed of light (78.8%); none is "—"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:.3g}%" if value < 1 else f"{value:.1f}%"
