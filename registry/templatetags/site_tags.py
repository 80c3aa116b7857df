"""Formatting for the public pages: figures, percentages, evidence levels, query strings."""

from functools import lru_cache

from django import template
from django.conf import settings
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.safestring import mark_safe

from registry import cache, charts
from registry.models import EVIDENCE_EXPLANATIONS

register = template.Library()


@register.simple_tag(takes_context=True)
def personal(context, name, arg=""):
    """A region of the page that depends on who asks: the header's account links, messages, a
    run's own submissions. registry/cache.py renders it again for each signed-in visitor."""
    return mark_safe(cache.personal_region(context.get("request"), name, arg))


@register.simple_tag
def fixed_url(name):
    """`{% url name %}` for a URL without arguments, reversed once per process: the personal
    regions are rendered again on every signed-in request, and `reverse()` was a seventh of
    their time."""
    return _fixed_url(name, get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF)


@lru_cache(maxsize=256)
def _fixed_url(name, script_prefix, urlconf):
    return reverse(name, urlconf=urlconf)


@register.filter
def headline(value):
    """The headline figure: four significant figures (144.2)."""
    return charts.significant(value, 4) if value is not None else "—"


@register.filter
def any_one_sample(runs) -> bool:
    """Whether a run table has a row whose order rests on one call each: its note is said once,
    under the table, rather than on every such row."""
    return any(getattr(getattr(run, "standing", None), "status", None) == "one-sample" for run in runs)


@register.filter
def measure(value):
    """A figure in tables and comparisons: two decimals (141.29)."""
    return charts.measure(value) if value is not None else "—"


@register.filter
def percent(value):
    """A signed change in percent with one decimal (-2.0%)."""
    return f"{value:+.1f}%" if value is not None else "—"


@register.filter
def pct(fraction, decimals=1):
    """A fraction as a percentage (0.004973 → 0.50%); anything but a number is "—"."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        return "—"
    return f"{fraction * 100:.{int(decimals)}f}%"


@register.filter
def evidence_explanation(level):
    return EVIDENCE_EXPLANATIONS.get(level, "")


@register.filter
def swatch(series):
    return charts.legend_swatch(series)


@register.simple_tag(takes_context=True)
def query(context, **changes):
    """The current query string with some parameters replaced (None or "" removes one); every
    repeated parameter (param=…) is kept."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        params.pop(key, None)
        if value not in (None, ""):
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"
