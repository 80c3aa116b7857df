"""KernelBench in real Chromium: the runs API filtered by source, a problem's page (GPUs ×
configurations, chart and table) and one of its run pages (the problem file, mean, std, min, max,
trials, the implementation and the GPU), on the shipped KernelBench data.

Debian's chromium, driven by Playwright for Python (never `playwright install`)."""

import json
import re

import pytest

from registry.models import BenchmarkRun, Kernel
from registry.sources.kernelbench.services import bundled_load
from tests.browser.conftest import needs_chromium

pytestmark = [
    pytest.mark.browser,
    needs_chromium,
]


@pytest.mark.django_db(transaction=True)
def test_a_visitor_reads_a_kernelbench_problem_and_one_of_its_runs(live_server, browser):
    from playwright.sync_api import expect

    bundled_load()
    page = browser.new_page(viewport={"width": 1200, "height": 900})

    # The API, filtered by source.
    page.goto(live_server.url + "/api/v1/runs/?source=kernelbench&current=true&format=json")
    listed = json.loads(page.locator("body").inner_text())
    assert (
        listed["count"] == BenchmarkRun.objects.filter(source__slug="kernelbench").current().count() == 1000
    )
    assert {run["source"] for run in listed["results"]} == {"kernelbench"}

    # Search by number, then the problem's page.
    page.goto(live_server.url + "/search/?q=L1+%2319")
    kernel = Kernel.objects.get(slug__startswith="kernelbench-l1-19-")
    page.get_by_role("link", name=kernel.name).first.click()
    expect(page.locator("h1")).to_have_text(f"All results for {kernel.name}")
    table = page.locator("table[data-table=speedups]")
    # Upstream lists only its H100 hosts now, eager and inductor's default.
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table).to_contain_text("NVIDIA H100 80GB HBM3")
    expect(table).to_contain_text("NVIDIA H100 PCIe")
    expect(table.locator("thead")).to_contain_text("compile-inductor-default")
    # Every GPU and configuration it ever published, withdrawn included.
    page.locator("[data-link=all-configurations]").click()
    table = page.locator("table[data-table=speedups]")
    for gpu in ("NVIDIA L40S", "NVIDIA T4", "NVIDIA B200", "NVIDIA A100 SXM4 40GB", "NVIDIA A10G"):
        expect(table).to_contain_text(gpu)
    for configuration in (
        "compile-inductor-max-autotune",
        "compile-inductor-reduce-overhead",
        "compile-cudagraphs",
    ):
        expect(table.locator("thead")).to_contain_text(configuration)
    bars = page.locator("figure[data-figure=speedup-chart] rect")
    assert bars.count() >= 20
    box = bars.first.bounding_box()
    assert box is not None and box["width"] > 1
    page.get_by_role("link", name="current runs only").click()

    # One run: the eager reference on an H100.
    page.locator("table[data-table=speedups] tbody tr", has_text="H100_Modal").get_by_role(
        "link"
    ).first.click()
    expect(page.locator("h1")).to_contain_text("eager on NVIDIA H100 80GB HBM3")
    run = BenchmarkRun.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[-1]))
    metrics = run.source_metrics
    expect(page.locator("[data-figure=mean]")).to_have_text(str(metrics["mean"]))
    expect(page.locator("[data-figure=std]")).to_have_text(str(metrics["std"]))
    expect(page.locator("[data-figure=min]")).to_have_text(str(metrics["min"]))
    expect(page.locator("[data-figure=max]")).to_have_text(str(metrics["max"]))
    expect(page.locator("[data-figure=num-trials]")).to_have_text(str(metrics["num_trials"]))
    expect(page.locator("[data-notice=mean-interval]")).to_contain_text("Student's t interval of the mean")
    expect(page.locator("[data-field=problem-text]")).to_contain_text("torch.relu(x)")
    # No quantile rows: the source published none.
    expect(page.locator("#measurements td", has_text=re.compile(r"^p(20|80)$"))).to_have_count(0)
    expect(page.locator("#measurements td", has_text=re.compile(r"^num_trials$"))).to_have_count(1)
