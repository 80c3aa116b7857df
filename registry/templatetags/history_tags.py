"""The run page's series section: {% run_series run %} (templates/registry/_series.html)."""

from django import template

from registry.series import series_of

register = template.Library()


@register.inclusion_tag("registry/_series.html")
def run_series(run):
    return {"series": series_of(run), "run": run}
