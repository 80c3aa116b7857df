"""The pages people use, in Debian's chromium at a phone's 390×844 and a laptop's 1366×900: no
horizontal overflow, chart text at least 11 px as rendered, and no serious or critical axe-core
violation (axe-core from node_modules, pinned in package-lock.json, injected into each page).
The admin pages a moderator uses are checked too."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db.models import Count
from django.urls import reverse

from attestations import services as attestation_services
from registry.models import BenchmarkRun, Change, Kernel
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.sources.liger.services import bundled_data_load
from tests.browser.conftest import needs_chromium
from tests.site.test_reference_record_pages import REFERENCE_ID

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
VIEWPORTS = ({"width": 390, "height": 844}, {"width": 1366, "height": 900})


pytestmark = [
    pytest.mark.browser,
    needs_chromium,
    pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (npm ci)"),
]

# What a page shows that a visitor must scroll sideways to see, outside a scrolling region of its
# own (.table-wrap, .chart-region, a <pre>); and every chart text's size as rendered.
MEASURE = """() => {
  const width = document.documentElement.clientWidth;
  const overflow = document.documentElement.scrollWidth - width;
  const chartText = [...document.querySelectorAll('svg.chart text')]
    .filter(t => t.getClientRects().length)
    .map(t => parseFloat(getComputedStyle(t).fontSize) * t.closest('svg').getScreenCTM().a);
  // The runs table and the speed-of-light table are meant to fit a laptop's column whole.
  const scrolling = [...document.querySelectorAll('.table-wrap')]
    .filter(w => w.querySelector('table.runs, table.sol-ceilings') && w.scrollWidth > w.clientWidth + 1)
    .map(w => w.querySelector('table').className);
  return {overflow, smallest: chartText.length ? Math.min(...chartText) : null, texts: chartText.length, scrolling};
}"""
AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.filter(v => v.nodes.length && (v.impact === 'serious' || v.impact === 'critical'))
    .map(v => `${v.id} (${v.impact}) x${v.nodes.length}: ${v.nodes[0].target.join(' ')}`);
}"""


def session_cookie(user, live_server) -> dict:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return {"name": settings.SESSION_COOKIE_NAME, "value": session.session_key, "url": live_server.url}


def site_pages() -> list[str]:
    reference = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
    best = BenchmarkRun.objects.get(comparison_key=reference.comparison_key, rank=1)
    controlled = BenchmarkRun.objects.filter(source__slug="kernelindex-controlled").order_by("pk").first()
    change = Change.objects.order_by("pk").first()
    return [
        reverse("registry:home"),
        reverse("registry:kernel-detail", args=["geglu"]),
        reverse("registry:kernel-detail", args=["geglu"]) + "?chart=sol",
        reference.get_absolute_url(),
        controlled.get_absolute_url(),
        change.after.get_absolute_url(),
        reverse("registry:compare", args=[reference.pk, best.pk]),
        reverse("registry:change-list"),
        reverse("registry:search") + "?q=geglu",
        reverse("registry:glossary"),
        reverse("attestations:attestation-create", args=[reference.pk]),
        reverse("attestations:report-create", args=[reference.pk]),
        reverse("attestations:account"),
        reverse("account_login"),
        reverse("account_signup"),
    ]


def admin_pages(contributor) -> list[str]:
    """The moderator's pages: the home with the queues, each queue, a submission and its decision
    page (where the reason is asked), a run, the jobs, the audit log and the operations page."""
    reference = BenchmarkRun.objects.get(external_id=REFERENCE_ID)
    attestation = attestation_services.attestation_submit(
        run=reference, author=contributor, kind="note", text="The backward pass includes one forward."
    )
    report = attestation_services.issue_report_create(
        run=reference, reporter=contributor, category="wrong_value", description="Off by 2x."
    )
    return [
        reverse("admin:index"),
        reverse("admin:attestations_attestation_changelist"),
        reverse("admin:attestations_attestation_change", args=[attestation.pk]),
        reverse("admin:attestations_attestation_decide", args=[attestation.pk, "reject"]),
        reverse("admin:attestations_issuereport_changelist"),
        reverse("admin:attestations_issuereport_change", args=[report.pk]),
        reverse("admin:registry_benchmarkrun_changelist"),
        reverse("admin:registry_benchmarkrun_change", args=[reference.pk]),
        reverse("admin:reruns_rerunjob_changelist"),
        reverse("admin:attestations_auditentry_changelist"),
        reverse("admin-operations"),
    ]


def check(page, url) -> list[str]:
    response = page.goto(url)
    problems = [] if response.status == 200 else [f"status {response.status}"]
    measured = page.evaluate(MEASURE)
    if measured["overflow"] > 0:
        problems.append(f"{measured['overflow']} px of horizontal overflow")
    if page.viewport_size["width"] >= 1366 and measured["scrolling"]:
        problems.append(f"tables scroll at {page.viewport_size['width']} px: {measured['scrolling']}")
    if measured["smallest"] is not None and measured["smallest"] < 11:
        problems.append(f"chart text at {measured['smallest']:.1f} px")
    page.evaluate(AXE.read_text())
    problems += page.evaluate(AXE_RUN)
    return problems


@pytest.mark.django_db(transaction=True)
def test_pages_read_on_a_phone_and_a_laptop(live_server, browser, contributor, moderator):
    bundled_data_load()
    controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
    pages = [(path, contributor) for path in site_pages()] + [
        (path, moderator) for path in admin_pages(contributor)
    ]
    found = {}
    for viewport in VIEWPORTS:
        # The CSP forbids inline scripts, rightly; the test injects axe-core past it.
        contexts = {
            user: browser.new_context(viewport=viewport, bypass_csp=True) for user in (contributor, moderator)
        }
        for user, context in contexts.items():
            context.add_cookies([session_cookie(user, live_server)])
        for path, user in pages:
            page = contexts[user].new_page()
            problems = check(page, live_server.url + path)
            page.close()
            if problems:
                found[f"{viewport['width']} px {path}"] = problems
        for context in contexts.values():
            context.close()
    assert found == {}, json.dumps(found, indent=1)


@pytest.mark.django_db(transaction=True)
def test_the_checks_catch_a_page_that_overflows(live_server, browser):
    """The overflow measure fails a page wider than the phone (the test could fail)."""
    page = browser.new_page(viewport=VIEWPORTS[0], bypass_csp=True)
    page.goto(live_server.url + reverse("registry:glossary"))
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<div style=\"width: 900px\">wide</div>')")
    assert page.evaluate(MEASURE)["overflow"] > 0
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<img src=x>')")  # no alt: critical
    page.evaluate(AXE.read_text())
    assert any(v.startswith("image-alt") for v in page.evaluate(AXE_RUN))


@pytest.mark.django_db(transaction=True)
def test_the_api_reference_states_its_language_and_reads_at_enough_contrast(live_server, browser):
    """Swagger UI's own page (/api/docs/), once its operations are drawn: no serious or critical
    axe-core finding on a laptop's width (the reference is for people at a desk)."""
    page = browser.new_page(viewport=VIEWPORTS[-1], bypass_csp=True)
    page.goto(live_server.url + reverse("api-docs"))
    page.wait_for_selector(".opblock-summary-method")
    assert page.evaluate("document.documentElement.lang") == "en"
    page.evaluate(AXE.read_text())
    assert page.evaluate(AXE_RUN) == []


IN_RUNS_TABLE = (
    "() => document.querySelector('table.runs').closest('.table-wrap').contains(document.activeElement)"
)


@pytest.mark.django_db(transaction=True)
def test_a_keyboard_reaches_the_runs_table_of_the_largest_kernel_pages_in_few_presses(live_server, browser):
    """The three kernel pages with the most runs (Liger's bundled data): the runs table is reached
    in at most 60 Tab presses (each chart is one stop; its data table stays closed) and the page
    holds fewer than 6,000 elements (7,237 and 190 presses before the charts became one stop)."""
    bundled_data_load()
    page = browser.new_page(viewport=VIEWPORTS[-1])
    measured = {}
    for kernel in Kernel.objects.annotate(runs_count=Count("runs")).order_by("-runs_count", "slug")[:3]:
        page.goto(live_server.url + reverse("registry:kernel-detail", args=[kernel.slug]))
        presses = 0
        while presses < 200 and not page.evaluate(IN_RUNS_TABLE):
            page.keyboard.press("Tab")
            presses += 1
        measured[kernel.slug] = (presses, page.evaluate("document.getElementsByTagName('*').length"))
    assert all(presses <= 60 and nodes < 6000 for presses, nodes in measured.values()), measured
