"""The run page's "Replications and notes" section and its "Report an issue" link.

Placeholder until the attestations app lands; the run page already includes these tags.
"""

from django import template

register = template.Library()


@register.inclusion_tag("attestations/run_section.html")
def run_attestations(run):
    return {"run": run}


@register.inclusion_tag("attestations/report_link.html")
def run_report_link(run):
    return {"run": run}
