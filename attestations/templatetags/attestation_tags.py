"""The run page's "Replications and notes" section and its "Report an issue" link."""

from django import template

from attestations import selectors

register = template.Library()


@register.inclusion_tag("attestations/run_section.html")
def run_attestations(run):
    """Approved attestations and the reproduction summary: one query, however many there are."""
    attestations = selectors.run_approved_attestations(run)
    return {
        "run": run,
        "attestations": attestations,
        "summary": selectors.reproduction_summary(run, attestations),
    }


@register.inclusion_tag("attestations/report_link.html")
def run_report_link(run):
    """No query: the form page itself sends visitors to log in and back."""
    return {"run": run}


@register.inclusion_tag("attestations/attestation.html")
def attestation_item(attestation, show_state=False):
    return {"attestation": attestation, "show_state": show_state}


@register.filter
def signed_percent(value):
    """+1.2% / −0.4%, with a real minus sign."""
    if value is None:
        return ""
    sign = "+" if value >= 0 else "\u2212"
    return f"{sign}{abs(value):.1f}%"
