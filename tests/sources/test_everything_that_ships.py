"""Everything that ships, loaded by `load_bundled_data` as on a fresh database, then loaded again:
once for this module (a whole load is the suite's most expensive set-up), and each test reads what
it checks from that. The second load must change nothing; the README's counts are the command's;
`verify_registry` passes over every source (as `.ci/run` once checked in a step of its own)."""

import json
import re
from collections import Counter
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
from registry.stats import verdict_model
from tests.harness.test_controlled_runs import shipped_entries
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WORDS = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
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
        script = load_script("controlled_figures")
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

    def test_the_readmes_prose_gives_kernelbenchs_current_runs_and_gpus(self, shipped):
        kernelbench = BenchmarkRun.objects.filter(source__slug="kernelbench")
        gpus = kernelbench.values("gpu_product").distinct().count()
        readme = " ".join(README.read_text(encoding="utf-8").split())
        assert f"eager and `torch.compile` on {WORDS.get(gpus, gpus)} GPUs" in readme
        assert f"Only {kernelbench.current().count():,} KernelBench runs are current" in readme


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


SOURCES_DOC = ROOT / "docs" / "sources.md"


def kernelbench_reruns_by(card: str, implementation: str = "") -> tuple[int, int, int]:
    """The verdicts of the reruns a card ran of KernelBench workloads (of one implementation where
    given): agree, disagree, inconclusive."""
    workloads = BenchmarkRun.objects.filter(source__slug="kernelbench").values("workload")
    reruns = RerunJob.objects.filter(kind="rerun", gpu_uuid__startswith=card, run__workload__in=workloads)
    if implementation:
        reruns = reruns.filter(run__implementation__provider=implementation)
    verdicts = reruns.values_list("verdict", flat=True)
    counts = Counter(verdicts)
    return counts["agrees"], counts["disagrees"], counts["inconclusive"]


def controlled_kernelbench() -> dict[tuple[str, str], tuple[int, int]]:
    """`source_counts --controlled`'s KernelBench rows: (GPU, implementation) -> (current, reproduced)."""
    out = StringIO()
    call_command("source_counts", "--controlled", stdout=out)
    rows = {}
    for line in out.getvalue().splitlines()[2:]:
        measures, gpu, implementation, current, reproduced = (
            cell.strip() for cell in line.strip("|").split("|")
        )
        if measures == "kernelbench":
            rows[gpu, implementation] = (int(current.replace(",", "")), int(reproduced.replace(",", "")))
    return rows


class TestKernelBenchFiguresInTheSourcesDoc:
    """docs/sources.md, "KernelBench's harness mapping": each card's verdicts and the counts in its
    prose are the loaded registry's."""

    def test_each_cards_rerun_verdicts_are_the_registrys(self, shipped):
        text = SOURCES_DOC.read_text(encoding="utf-8")
        block = re.search(r"<!-- kernelbench-reruns:.*?-->\n(.*?)<!-- /kernelbench-reruns -->", text, re.S)
        rows = [line.strip("|").split("|") for line in block[1].strip().splitlines()[2:]]
        assert rows
        for card, _, reran, *verdicts in rows:
            if not any(cell.strip() for cell in verdicts):
                assert kernelbench_reruns_by(card.strip()) == (0, 0, 0)
                continue
            found = kernelbench_reruns_by(card.strip())
            assert tuple(int(cell) for cell in verdicts) == found, card
            if reran.strip().isdigit():
                assert int(reran) == sum(found), card

    def test_the_prose_gives_the_registrys_counts(self, shipped):
        text = " ".join(SOURCES_DOC.read_text(encoding="utf-8").split())
        rows = controlled_kernelbench()
        h100 = [figures for (gpu, _), figures in rows.items() if "H100" in gpu]
        h100_current, h100_reproduced = sum(f[0] for f in h100), sum(f[1] for f in h100)
        assert f"So {h100_reproduced:,} of the {h100_current:,} current H100 runs are `reproduced`" in text
        agree, disagree, inconclusive = kernelbench_reruns_by("GPU-34250b52")
        assert (
            f"it reran GPU-25fc3e73's {agree + disagree + inconclusive} ({agree} agree, {disagree} disagree, "
            f"{inconclusive} inconclusive)" in text
        )
        eager = rows["NVIDIA H200", "eager"][0]
        assert rows["NVIDIA H100 80GB HBM3", "eager"][0] == eager  # every problem, on both models
        compiled = {
            gpu: rows[gpu, "compile-inductor-default"][0] for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
        }
        assert (
            f"every problem has an H200 figure eager ({eager}) and {compiled['NVIDIA H200']} compiled" in text
        )
        workloads = BenchmarkRun.objects.filter(source__slug="kernelbench").values("workload")
        h200_runs = BenchmarkRun.objects.current().filter(
            source__slug="kernelindex-controlled", gpu_product="NVIDIA H200", workload__in=workloads
        )

        def reran(name: str, implementation: str) -> str:
            agree, disagree, inconclusive = kernelbench_reruns_by("GPU-43d4bb4e", implementation)
            return (
                f"{name} {agree + disagree + inconclusive} ({agree} agree, {disagree} disagree, "
                f"{inconclusive} inconclusive)"
            )

        assert f"{reran('eager', 'eager')}, {reran('compiled', 'compile-inductor-default')}" in text
        alone = h200_runs.exclude(rerun_jobs__kind="rerun").count()
        assert (
            f"the {alone} H200 runs measured on GPU-43d4bb4e alone await another H200, "
            f"{eager - compiled['NVIDIA H200']} problems compiled on the H200 and "
            f"{eager - compiled['NVIDIA H100 80GB HBM3']} on the H100 have no current run" in text
        )


class TestKernelBenchPairsAreTheRegistrys:
    """registry/sources/kernelbench/pairs.py, which the H100's verdict model is fitted on, reads the
    shipped sweep files as the recorder pairs them: each GPU model's reruns of KernelBench
    workloads, by kernel and class, are the loaded registry's, and each states its class."""

    @pytest.mark.parametrize("gpu", ["nvidia-h200", "nvidia-h100-80gb-hbm3"])
    def test_by_kernel_and_class(self, shipped, gpu):
        from registry.sources.kernelbench import pairs

        workloads = BenchmarkRun.objects.filter(source__slug="kernelbench").values("workload")
        reruns = RerunJob.objects.filter(kind="rerun", gpu_slug=gpu, run__workload__in=workloads).exclude(
            verdict=""
        )
        found = Counter(
            (kernel, sampling["verdict_model"]["verdict_class"])
            for kernel, sampling in reruns.values_list("run__kernel__slug", "sampling")
        )
        assert found and found == Counter((pair.kernel, pair.key) for pair in pairs.pairs(gpu))

    def test_a_class_without_a_margin_says_so_on_the_page_the_job_and_the_api(self, shipped, client):
        job = RerunJob.objects.filter(
            kind="rerun",
            gpu_slug="nvidia-h100-80gb-hbm3",
            sampling__verdict_model__margin=None,
            sampling__verdict_model__verdict_class="latency|host-bound",
        ).first()
        assert job is not None and job.verdict == "inconclusive" and job.tolerance is None
        words = "no margin for ops whose timed pass the host paces on H100 80GB HBM3 cards yet: "
        assert job.sampling["verdict_model"]["words"].startswith(f"inconclusive: {words}")
        page = client.get(f"/runs/{job.run_id}/").content.decode()
        assert words in page and "±%" not in page
        assert (
            "no margin for ops whose timed pass the host paces: "
            in client.get(f"/jobs/{job.pk}/").content.decode()
        )
        answer = client.get(f"/api/v1/runs/{job.run_id}/")
        assert answer.status_code == 200 and words in json.dumps(answer.json(), ensure_ascii=False)

    def test_a_rerun_of_another_compiled_program_says_so_and_the_page_names_each_program(
        self, shipped, client
    ):
        apart = RerunJob.objects.filter(
            kind="rerun",
            sampling__verdict_model__verdict_class__startswith=f"latency|{verdict_model.PROGRAMS_CLASS}",
        ).select_related("run")
        measures = {job.pk: job.run.measured_by_jobs.filter(kind="measure").first() for job in apart}
        assert apart.count() and apart.count() == sum(
            verdict_model.programs_differ([job.sampling, measures[job.pk].sampling]) for job in apart
        )
        job = next(job for job in apart if (measures[job.pk].sampling.get("program") or {}).get("dynamic"))
        assert (
            job.verdict == "inconclusive"
            and job.sampling["verdict_model"]["words"] == verdict_model.PROGRAMS_WORDS
        )
        page = client.get(f"/runs/{job.run_id}/").content.decode()
        assert "TorchDynamo compiled the timed program for symbolic input sizes, carried over" in page
        job_page = client.get(f"/jobs/{job.pk}/").content.decode()
        assert f"compiled into two different programs: {verdict_model.PROGRAMS_APART}" in job_page
        answer = client.get(f"/api/v1/runs/{job.run_id}/").json()
        assert answer["measurement"]["compiled_for"].startswith("symbolic input sizes")
        rerun = next(r for r in answer["reruns"] if r["job"] == job.pk)
        assert rerun["verdict_class"] == job.sampling["verdict_model"]["verdict_class"]
        assert rerun["margin_from"] == verdict_model.PROGRAMS_APART and rerun["tolerance"] is None
        assert rerun["verdict_note"].startswith(
            "I" + verdict_model.PROGRAMS_WORDS[1:] + ". Difference of medians"
        )


class TestEverySourcesFiguresInTheProtocolDoc:
    """docs/protocol.md's paragraph on every source: the share of current cuda-v1 latency runs
    `reproduced`, and the verdicts of GPU-timed latency reruns on another card, KernelBench's by GPU
    model and every source's, as the loaded registry has them."""

    def test_the_paragraph_gives_the_registrys_figures(self, shipped):
        text = " ".join((ROOT / "docs" / "protocol.md").read_text(encoding="utf-8").split())
        latency = BenchmarkRun.objects.current().filter(
            protocol__comparability_family="kernelindex/cuda-v1", metric="latency"
        )
        reproduced, runs = latency.filter(evidence_level="reproduced").count(), latency.count()
        assert (
            f"{reproduced / runs:.1%} of the current cuda-v1 latency runs are `reproduced` ({reproduced:,} of {runs:,})"
            in text
        )
        kernelbench = set(
            BenchmarkRun.objects.filter(source__slug="kernelbench").values_list("workload", flat=True)
        )
        reruns = RerunJob.objects.filter(
            kind="rerun", run__metric="latency", run__protocol__comparability_family="kernelindex/cuda-v1"
        ).exclude(verdict="")
        counts = Counter()
        for verdict, sampling, product, workload in reruns.values_list(
            "verdict", "sampling", "run__gpu_product", "run__workload"
        ):
            account = sampling.get("verdict_model") or {}
            if sampling.get("same_gpu") is not False or account.get("host_bound"):
                continue  # on the measuring card, or its figure includes the host's pace
            if account.get("verdict_class") and not verdict_model.is_gpu_timed(account["verdict_class"]):
                continue  # judged apart (two kinds of host, two compiled programs), as the Liger figures count
            counts["every", verdict] += 1
            if workload in kernelbench:
                counts[product, verdict] += 1

        def share(group: str) -> str:
            n = sum(counts[group, v] for v in ("agrees", "disagrees", "inconclusive"))
            agree, disagree = counts[group, "agrees"], counts[group, "disagrees"]
            return (
                f"{agree / n:.1%} agree and {disagree / n:.1%} disagree ({agree:,} and {disagree} of {n:,})"
            )

        assert f"on the H200s {share('NVIDIA H200')}" in text
        h100 = share("NVIDIA H100 80GB HBM3").replace(" agree and", " and").replace(" disagree (", " (")
        assert f"on the H100s {h100}" in text
        assert f"over every source and card {share('every')}" in text


class TestTheSweepsStatusInTheDocs:
    """`controlled_sweep --gpu nvidia-h200 --status` on the loaded registry gives the targets,
    measured, reproduced and unsettled counts docs/reruns.md and the controlled runs' report quote."""

    def test_docs_quote_the_status(self, shipped):
        from registry.reruns.sweep.status import progress

        status = progress(gpu_slug="nvidia-h200")
        targets, measured = status["targets"], status["measured"]
        skipped = status["not_tried_after_a_timeout_or_out_of_memory"]
        reproduced, stuck = status["reproduced"], status["inconclusive_after_the_most_reruns"]
        assert status["to_measure"] == 0 and targets - measured == skipped
        owed = status["reruns_owed"]
        assert (
            owed["never_rerun"] == owed["rerun_only_on_the_measuring_card"] == 0
        )  # "every measured run has been rerun on another card"
        reruns = " ".join((ROOT / "docs" / "reruns.md").read_text().split())
        for phrase in (
            f"{measured:,} of the sweep's {targets:,} targets measured",
            f"the other {skipped} targets are not tried",
            f"of the sweep's {measured:,} measured targets, {reproduced:,}, and {stuck} stay `inconclusive`",
        ):
            assert phrase in reruns, f"docs/reruns.md lacks: {phrase}"
        report = " ".join(
            (ROOT / "docs" / "reports" / "2026-12-04-h200-controlled-runs.md").read_text().split()
        )
        for phrase in (
            f"{measured:,} of its {targets:,} targets measured ({measured / targets:.1%}). The {skipped} others",
            f"and {stuck} have had their three and stay `inconclusive`. Of the {measured:,} measured targets, "
            f"{reproduced:,} are `reproduced` ({reproduced / measured:.0%})",
            f"{owed['inconclusive_on_another_card']} such runs are owed one more rerun",
        ):
            assert phrase in report, f"the report lacks: {phrase}"


def test_the_reruns_doc_gives_the_superseded_controlled_runs(shipped):
    """docs/reruns.md, "A target measured twice": the targets measured twice are the controlled runs
    superseded, all of the H200 sweeps of 2026-12-01 and 2026-12-02."""
    superseded = BenchmarkRun.objects.filter(
        source__slug="kernelindex-controlled", superseded_by__isnull=False
    )
    text = " ".join((ROOT / "docs" / "reruns.md").read_text().split())
    assert f"2026-12-01 and 2026-12-02 measured {superseded.count()} targets twice" in text
    assert f"a fresh `load_bundled_data` gives the same {superseded.count()} superseded runs" in text


class TestTheImportingDocsHistory:
    """docs/importing.md, the shipped Liger history: its versions, runs, steps and changes are the
    shipped index's and the loaded registry's."""

    def test_versions_runs_steps_and_changes(self, shipped):
        from registry.models import Change

        text = " ".join((ROOT / "docs" / "importing.md").read_text().split())
        index = (ROOT / "registry" / "sources" / "liger" / "data" / "history" / "INDEX.tsv").read_text()
        versions = [line.split("\t") for line in index.strip().splitlines()[1:]]
        first, last = versions[0], versions[-1]
        assert (
            f"The shipped history: {len(versions)} versions, from #{first[3]} ({first[2][:10]}) to "
            f"#{last[3]} ({last[2][:10]})" in text
        )
        liger = BenchmarkRun.objects.filter(source__slug="liger-kernel")
        current, withdrawn = liger.current().count(), liger.filter(withdrawn=True).count()
        superseded = liger.filter(superseded_by__isnull=False).count()
        assert (
            f"give **{liger.count():,} runs: {current:,} current, {superseded} superseded by a later value, "
            f"{withdrawn} withdrawn**" in text
        )
        series = Counter(liger.values_list("comparison_key", "provider"))
        steps = sum(count - 1 for count in series.values())
        changes = Change.objects.filter(after__source__slug="liger-kernel")
        kinds = Counter(changes.values_list("kind", flat=True))
        assert (
            f"the history holds **{steps} steps; {changes.count()} are changes: {kinds['improvement']} "
            f"improvements, {kinds['regression']} regressions, {kinds['uncertain']} uncertain**, and "
            f"{steps - changes.count()} are noise" in text
        )
        by_pull_request = re.search(r"By pull request: (.*?)\. One example", text)[1]
        quoted = re.findall(r"#(\d+) (\d+) \(([^)]*)\)", by_pull_request)
        assert quoted
        for number, total, parts in quoted:
            ours = changes.filter(attributed_to__pull_request=int(number))
            found = Counter(ours.values_list("kind", flat=True))
            said = {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (\w+)", parts)}
            assert (int(total), said) == (ours.count(), {kind: n for kind, n in found.items()}), number
        assert sum(int(total) for _, total, _ in quoted) == changes.count()

    def test_the_jsd_example_and_the_controlled_runs_changes(self, shipped):
        from registry.models import Change

        text = " ".join((ROOT / "docs" / "importing.md").read_text().split())
        example = Change.objects.get(
            kernel__slug="jsd",
            provider="torch",
            gpu_product="NVIDIA H100 PCIe",
            operation_mode="forward",
            attributed_to__pull_request=290,
            before__median__gt=33.06,
            before__median__lt=33.07,
        )
        before, after = example.before, example.after
        assert (
            f"went from {before.median:.2f} ms (p20–p80 {before.p20:.3f}–{before.p80:.3f}) to {after.median:.2f} "
            f"ms ({after.p20:.3f}–{after.p80:.3f}), {example.ratio - 1:+.1%}, ranges apart: a {example.kind}, "
            f"first published by commit {example.attributed_to.upstream_commit[:8]}, pull request #290"
            in text
        )
        controlled = Change.objects.filter(after__source__slug="kernelindex-controlled").count()
        said = (
            "the shipped controlled runs hold none"
            if controlled == 0
            else f"{controlled} with the runs shipped"
        )
        assert said in text
