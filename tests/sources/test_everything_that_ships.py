"""Everything that ships, loaded by `load_bundled_data` as on a fresh database, then loaded again:
once for this module (a whole load is the suite's most expensive set-up), and each test reads what
it checks from that. The second load must change nothing; the README's counts are the command's;
`verify_registry` passes over every source (as `.ci/run` once checked in a step of its own)."""

import importlib.util
import json
import re
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from django.core.management import call_command

from registry import speed_of_light
from registry.models import BenchmarkRun
from registry.reruns.models import RerunJob
from registry.speed_of_light import speed_of_light_stale
from tests.harness.test_controlled_runs import shipped_entries

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def shipped(django_db_setup, django_db_blocker):
    """Both loads' output, and the GPU model of every speed-of-light verdict each computed."""
    first, second, computed = StringIO(), StringIO(), []
    compute = speed_of_light.verdict

    def counted(**arguments):
        computed.append(arguments["gpu_slug"])
        return compute(**arguments)

    with django_db_blocker.unblock(), mock.patch.object(speed_of_light, "verdict", counted):
        call_command("load_bundled_data", stdout=first)
        built = len(computed)
        call_command("load_bundled_data", stdout=second)
    yield SimpleNamespace(
        first=first.getvalue(), second=second.getvalue(), built=computed[:built], again=computed[built:]
    )
    with django_db_blocker.unblock():
        call_command("flush", "--noinput", verbosity=0)


class TestLoadBundledDataCommand:
    def test_it_loads_the_liger_data_then_the_controlled_runs_and_again_changes_nothing(self, shipped):
        count = len(shipped_entries())
        assert f"kernelindex-controlled: {count} rows: {count} created" in shipped.first
        assert f"kernelindex-controlled: {count} rows: 0 created, {count} unchanged" in shipped.second
        assert BenchmarkRun.objects.filter(source__slug="liger-kernel").current().count() == 2448
        # The shipped reruns are judged again under today's rule after loading (the verdict model
        # for cuda-v1 latency); a second load changes no verdict. A run is `reproduced` exactly
        # when one of its reruns now raises the level.
        assert re.search(r"verdicts: \d+ reruns judged again, \d+ changed", shipped.first)
        assert re.search(r"verdicts: \d+ reruns judged again, 0 changed", shipped.second)
        backed = {
            job.run_id for job in RerunJob.objects.filter(kind="rerun", verdict="agrees") if job.raises_level
        }
        reproduced = set(
            BenchmarkRun.objects.filter(evidence_level="reproduced").values_list("pk", flat=True)
        )
        assert reproduced == backed
        # ... and the database's cuda-v1 latency runs reproduced are the figure the script gives.
        spec = importlib.util.spec_from_file_location("figures", ROOT / "scripts" / "controlled_figures.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        model = script.verdict_model.Model.from_json(json.loads(script.MODEL_PATH.read_text()))
        expected = script._reproduced_figures(script.FOLDER, model)["reproduced runs"]
        # (the script reads the shipped Liger runs' exports; KernelBench's H100 and H200
        # measurements, judged by the same rule, are counted by their own report)
        exported = {entry["run"]["external_id"] for entry in script.shipped.entries(script.FOLDER)}
        latency = BenchmarkRun.objects.filter(
            protocol__comparability_family="kernelindex/cuda-v1",
            metric="latency",
            evidence_level="reproduced",
        )
        assert latency.filter(external_id__in=exported).count() == expected


class TestSpeedOfLight:
    def test_each_run_is_computed_as_it_is_built_and_a_second_load_computes_none(self, shipped):
        assert len(shipped.built) >= BenchmarkRun.objects.count() > 3000
        assert shipped.again == []
        assert not speed_of_light_stale().exists()
        assert "speed-of-light: 0 runs' speed of light updated" in shipped.second


def quoted(name: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = re.search(rf"<!-- {name}:.*?-->\n(.*?)<!-- /{name} -->", text, re.S)
    assert block, f"the README has no {name} block"
    return block[1].strip().splitlines()


class TestReadmeCounts:
    def test_the_readme_quotes_the_counts_the_command_prints(self, shipped):
        out = StringIO()
        call_command("source_counts", stdout=out)
        assert out.getvalue().strip().splitlines() == quoted("source-counts")

    def test_the_readme_quotes_kernelindexs_own_runs_as_the_command_prints_them(self, shipped):
        out = StringIO()
        call_command("source_counts", "--controlled", stdout=out)
        printed = out.getvalue().strip().splitlines()
        assert printed == quoted("controlled-counts")
        current = BenchmarkRun.objects.current().filter(source__slug="kernelindex-controlled").count()
        assert sum(int(line.split("|")[4].replace(",", "")) for line in printed[2:]) == current


class TestSpeedOfLightReport:
    def test_the_dated_report_is_what_the_command_prints(self, shipped):
        """docs/reports/2026-12-06-speed-of-light.md: the command's whole output on what ships."""
        out = StringIO()
        call_command("speed_of_light_report", stdout=out)
        report = (ROOT / "docs" / "reports" / "2026-12-06-speed-of-light.md").read_text(encoding="utf-8")
        block = re.search(r"```text\n(.*?)```", report, re.S)
        assert block[1] == out.getvalue()


class TestVerifyRegistry:
    def test_every_run_of_every_source_verifies(self, shipped):
        out = StringIO()
        call_command("verify_registry", stdout=out)
        assert f"{BenchmarkRun.objects.count()} runs verified" in out.getvalue()
        assert BenchmarkRun.objects.values("source").distinct().count() >= 3
