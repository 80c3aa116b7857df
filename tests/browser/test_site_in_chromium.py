"""A visitor in real Chromium: home → kernel page → run page → compare page, on the bundled data.

Debian's chromium, driven by Playwright for Python (never `playwright install`). Screenshots go
to docs/screenshots/; the kernel and run pages are committed; the README shows the run page.
"""

import os
from pathlib import Path

import pytest

from registry.models import BenchmarkRun
from registry.sources.liger.services import bundled_data_load
from tests.browser.conftest import needs_chromium

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


pytestmark = [
    pytest.mark.browser,
    needs_chromium,
]


@pytest.mark.django_db(transaction=True)
def test_visitor_reads_the_reference_record_and_compares_it_with_the_best(live_server, browser):
    from playwright.sync_api import expect

    bundled_data_load()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1200, "height": 900})

    page.goto(live_server.url + "/")
    expect(page.locator("h1")).to_have_text("KernelIndex")
    # every run the registry holds, the source's history included
    expect(page.locator(".cards")).to_contain_text(f"{BenchmarkRun.objects.count():,} runs")
    page.screenshot(path=SCREENSHOTS / "home.png")

    page.get_by_role("link", name="GeGLU MLP", exact=True).first.click()
    expect(page.locator("h1")).to_have_text("All results for GeGLU MLP")
    charts = page.locator("svg.chart")
    expect(charts).to_have_count(6)
    a100_backward = page.locator("figure.panel", has_text="NVIDIA A100 SXM4 80GB · backward · latency")
    expect(a100_backward.locator("polyline.series-line")).to_have_count(2)
    box = a100_backward.locator("polyline.series-line").first.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 50
    expect(a100_backward.locator(".legend")).to_contain_text("huggingface")
    expect(a100_backward.locator(".legend")).to_contain_text("liger")
    page.screenshot(path=SCREENSHOTS / "kernel-page.png")

    # The filter form is a plain GET form: no JavaScript needed.
    page.select_option("select[name=operation_mode]", "backward")
    page.select_option("select[name=metric]", "latency")
    page.select_option("select[name=param] >> nth=0", "T:8192")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    page.locator("table.runs").get_by_role("link", name="144.21 ms").click()

    expect(page.locator("h1")).to_contain_text(
        "GeGLU MLP, backward pass: huggingface on NVIDIA A100 SXM4 80GB"
    )
    expect(page.locator("[data-figure=median]")).to_have_text("144.2 ms")
    expect(page.locator("[data-figure=rank]")).to_have_text("rank 2 in its comparison group")
    expect(page.locator("[data-figure=compare]")).to_have_text("Compare with #1 → liger, 141.29 ms (-2.0%)")
    expect(page.locator("[data-field=external-id]")).to_have_text(
        "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/"
        "batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
    )
    expect(page.locator(".evidence")).to_contain_text(
        "The source published it; KernelIndex has not checked it."
    )
    page.screenshot(path=SCREENSHOTS / "run-page.png")

    phone = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    phone.goto(page.url)
    expect(phone.locator("[data-figure=median]")).to_have_text("144.2 ms")
    overflow = phone.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, "the run page scrolls sideways on a phone"
    phone.screenshot(path=SCREENSHOTS / "run-page-phone.png")
    phone.close()

    page.locator("[data-figure=compare]").click()
    expect(page.locator("h1")).to_have_text("Compare: huggingface and liger")
    expect(page.locator("[data-figure=a-median]")).to_have_text("144.21 ms")
    expect(page.locator("[data-figure=b-median]")).to_have_text("141.29 ms")
    expect(page.locator("[data-figure=change]")).to_have_text("-2.0%")
    expect(page.locator("[data-figure=ratio]")).to_have_text("0.980")
    expect(page.locator(".banner.good")).to_contain_text("Comparable.")
    page.screenshot(path=SCREENSHOTS / "compare-page.png")
    assert os.path.getsize(SCREENSHOTS / "run-page.png") > 10_000
