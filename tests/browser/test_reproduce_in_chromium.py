"""Reproduce it yourself, in real Chromium: a contributor reads the run page's kit command (with
the live server's own URLs), downloads the kit it names, gets an API token on the account page,
and uploads a result file on the reproduction form; it is pending, marked as carrying its data,
with the figures computed from its samples and the contributor's verdict."""

import json

import pytest

from attestations.models import Attestation
from registry.models import BenchmarkRun
from registry.reruns.kit.build import kit_build
from registry.stats import medians as stats
from tests.attestations.test_data_reproductions import result_file
from tests.browser.conftest import needs_chromium
from tests.conftest import PASSWORD, make_user
from tests.faults.support import small_cpu_rows
from tests.reruns.conftest import csv_import

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


def test_the_run_pages_command_and_the_upload_form(live_server, browser, tmp_path):
    csv_import(tmp_path / "runs.csv", small_cpu_rows(1))
    run = BenchmarkRun.objects.public().get()
    make_user("ada")
    page = browser.new_context().new_page()
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_login", "ada")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_load_state()

    page.goto(live_server.url + run.get_absolute_url())
    command = page.text_content(".reproduce-command")
    pip_line, repro_line = command.strip().splitlines()
    kit_url = pip_line.removeprefix("pip install ")
    assert kit_url.startswith(live_server.url + "/kit/kernelindex-kit-")
    assert (
        repro_line
        == f"kernelindex-repro {live_server.url}{run.get_absolute_url()} --upload --token YOUR_API_TOKEN"
    )
    assert "any CPU (a CPU run)" in page.text_content(".reproduce-needs")
    download = page.request.get(kit_url)
    assert download.status == 200 and download.body() == kit_build().read_bytes()

    page.get_by_role("link", name="your account page").click()
    page.get_by_role("button", name="Create a token").click()
    page.wait_for_load_state()
    assert len(page.text_content(".api-token")) == 40

    page.goto(live_server.url + run.get_absolute_url())
    page.get_by_role("link", name="the reproduction form").click()
    page.wait_for_url("**/attest/")
    document = result_file(run)
    upload = tmp_path / "kernelindex-run.json"
    upload.write_text(json.dumps(document))
    page.check("input[name=kind][value=reproduction]")
    page.set_input_files("#id_file", str(upload))
    page.get_by_role("button", name="Submit for moderation").click()
    page.wait_for_url("**/me/submissions/")

    filed = Attestation.objects.get()
    assert (filed.state, filed.origin) == ("pending", "file")
    assert filed.median == stats.quantiles(document["samples"])[0]
    page.goto(live_server.url + filed.get_absolute_url())
    assert "With its data" in page.text_content(f"#attestation-{filed.pk} .attestation-origin")
    assert "The contributor's verdict: inconclusive" in page.text_content(
        f"#attestation-{filed.pk} .attestation-verdict"
    )
    assert page.locator(f"#attestation-{filed.pk} table.environment-compare tr").count() >= 10
