"""docs/protocol.md, "Verdicts by class", gives the figures scripts/controlled_figures.py
--verdicts computes from the shipped runs today, and the shipped model is the one it fits."""

import json
from pathlib import Path

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figures() -> dict:
    module = load_script("controlled_figures")
    return module.verdict_figures(module.FOLDER)


def section() -> str:
    text = (ROOT / "docs" / "protocol.md").read_text()
    start = text.index("## Verdicts by class")
    return text[start : text.index("\n## ", start + 1)]


def expected_lines(figures: dict) -> list[str]:
    """The section's table rows and figures, as the script gives them."""
    model = figures["model"]
    lines = []
    for key, params in sorted(model.classes.items()):
        counts = figures.get(f"class {key}", (0, 0, 0))
        verdicts = " / ".join(str(n) for n in counts) if sum(counts) else "—"
        lines.append(
            f"| {key.split('|', 1)[1].replace('|', ', ')} | {params.process_sd:.2%} | ±{params.margin:.1%} ({params.margin_from}) "
            f"| ±{params.disagree_beyond:.1%} | {verdicts} |"
        )
    pct = "{:.1%}".format
    lines += [
        f"| GPU-timed latency reruns on another card | {pct(figures['cross agree'])} agree, "
        f"{pct(figures['cross disagree'])} disagree, of {figures['cross n']:,} |",
        f"| the first rerun on another card of each run | {pct(figures['first agree'])} agree |",
        f"| leave one kernel out | {pct(figures['loko agree'])} agree |",
        f"| same-card coverage of the interval for a rerun | {pct(figures['coverage'])} of {figures['same n']} "
        f"({pct(figures['coverage loko'])} with each kernel's component fitted on the others; "
        f"{pct(figures['coverage within'])} from the within-job variance alone) |",
        f"| shift test, +5% (GPU-timed, 0.1 ms or more) | {pct(figures['shift 5% agree'])} agree |",
        f"| shift test, +10% | {pct(figures['shift 10% disagree'])} disagree |",
        f"| host-bound reruns, counted apart | {figures['host-bound reruns']} |",
        f"| current cuda-v1 latency runs `reproduced` | {pct(figures['reproduced share'])} of all; "
        f"{pct(figures['reproduced gpu share'])} of the GPU-timed ones |",
    ]
    return lines


def test_the_section_gives_the_scripts_figures(figures):
    text = section()
    for line in expected_lines(figures):
        assert line in text, f"docs/protocol.md lacks: {line}"


def test_the_paragraph_on_the_misses_gives_the_scripts_figures(figures):
    text = " ".join(section().split())
    pct = "{:.1%}".format
    for phrase in (
        *host_kind_phrases(figures),
        f"({figures['shift 5% agrees at the cap']} of the {figures['shift 5% agrees']} shifted reruns that agree",
        f"({figures['inconclusive at the cap']} of {figures['inconclusive']}) and under 0.1 ms "
        f"({figures['inconclusive under 0.1 ms']})",
        f"(a 95% interval, disagreeing beyond the margin itself): {pct(figures['before agree'])} agree, "
        f"{pct(figures['before disagree'])} disagree, {pct(figures['before shift 5% agree'])} agree shifted by +5%",
        f"{figures['repeat reruns']} reruns on another card are second and later reruns",
        f"each run agrees in {pct(figures['first agree'])}",
        f"{figures['cap named at the top clock']} of the {figures['cap named']} readings that name a power limit",
        f"gives {pct(figures['slowed agree'])} agreement and a shifted agreement of "
        f"{pct(figures['slowed shift 5% agree'])}",
        f"with the GPU-timed ones under today's model, they give {pct(figures['with host kinds agree'])} "
        f"agree and {pct(figures['with host kinds disagree'])} disagree of "
        f"{figures['cross n'] + figures['host kinds cross n']:,}",
        f"{figures['host kinds cross n']} on another card: {pct(figures['host kinds cross agree'])} agree",
        *disagreement_phrases(figures),
    ):
        assert phrase in text, f"docs/protocol.md lacks: {phrase}"


def disagreement_phrases(figures: dict) -> list[str]:
    """Where the disagreements are, as the misses paragraph gives it."""
    count = round(figures["cross disagree"] * figures["cross n"])
    # "All": every disagreeing pair is of jobs that sampled one process (none in blocks).
    assert figures["disagree one process"] == count, (figures["disagree one process"], count)
    return [
        f"All {count} that disagree are between jobs that each sampled one process",
        f"{figures['disagree few samples']} with 50 samples or fewer on a side",
        *(
            f"{a}→{b} {hour.replace('T', ' ')}h: {n} of {total}"
            for (a, b, hour), n, total in figures["disagree sessions"]
        ),
        *(f"{kernel}: {n} of {total}" for kernel, n, total in figures["disagree kernels"]),
    ]


def host_kind_phrases(figures: dict) -> list[str]:
    """The pairs by kinds of host the "Timed on two kinds of host" paragraph gives."""
    sixteen, thirty_two = "Intel(R) Xeon(R) Processor, 16 threads", "Intel(R) Xeon(R) Processor, 32 threads"
    across = figures[f"hosts {thirty_two} / {sixteen}"]
    alike = figures[f"hosts {sixteen} / {sixteen}"]
    shared = figures[f"hosts {thirty_two} / {thirty_two}"]
    return [
        f"lie apart by {across[1]:.1%} at the 95th percentile ({across[0]} pairs)",
        f"by {alike[1]:.1%} ({alike[0]:,} pairs with 16 threads on both sides)",
        f"and {shared[1]:.1%} ({shared[0]} pairs with 32 on both)",
        f"the faster in {across[2]} of the {across[0]} pairs, against {alike[2]} of the {alike[0]:,} on one kind",
    ]


def test_the_shipped_model_is_the_one_the_script_fits(figures):
    shipped = json.loads((ROOT / "registry" / "data" / "verdict-model-nvidia-h200.json").read_text())
    assert shipped == figures["model"].to_json()


H100 = "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def h100_figures() -> dict:
    module = load_script("controlled_figures")
    return module.kernelbench_model_figures(H100)


class TestTheH100Model:
    """docs/protocol.md, "The H100's model": fitted on KernelBench's sweeps of the H100 cards, its
    classes and checks as scripts/controlled_figures.py --gpu-model prints them, and the shipped
    model the one it fits."""

    def test_the_shipped_model_is_the_one_the_script_fits(self, h100_figures):
        shipped = json.loads((ROOT / "registry" / "data" / f"verdict-model-{H100}.json").read_text())
        assert shipped == h100_figures["model"].to_json()
        assert shipped["gpu_name"] == "H100 80GB HBM3"

    def test_the_paragraph_and_table_give_the_scripts_figures(self, h100_figures):
        text = section()
        flat = " ".join(text.split())
        for key, params in sorted(h100_figures["model"].classes.items()):
            name = key.split("|", 1)[1].replace("|", ", ")
            if params.margin == params.margin:  # finite
                row = f"| {name} | ±{params.margin:.1%} ({params.margin_from}) | ±{params.disagree_beyond:.1%} |"
            else:
                row = f"| {name} | none ({params.margin_from}) | — |"
            assert row in text, f"docs/protocol.md lacks: {row}"
        pct = "{:.1%}".format
        figures = h100_figures
        assert figures["same card"] == 0
        for phrase in (
            f"{figures['reruns']} reruns, none on the measuring card",
            f"Of its {figures['cross n']} GPU-timed reruns on another card, {pct(figures['cross agree'])} agree and "
            f"{pct(figures['cross disagree'])} disagree; leave one kernel out {pct(figures['loko agree'])} agree; "
            f"shifted by +5%, {pct(figures['shift 5% agree'])} agree; by +10%, {pct(figures['shift 10% disagree'])} "
            f"disagree ({figures['shift n']} reruns of 0.1 ms or more)",
        ):
            assert phrase in flat, f"docs/protocol.md lacks: {phrase}"
