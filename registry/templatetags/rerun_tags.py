"""The run page's rerun history. Placeholder until the reruns work lands."""

from django import template

register = template.Library()


@register.inclusion_tag("registry/rerun_history.html")
def run_reruns(run):
    return {"run": run, "jobs": []}
