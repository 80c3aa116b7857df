"""Figures in docs prose counted from files the repository ships, read again from those files."""

import csv
import json
import re

from tests.docs.commands import ROOT

TIMEOUTS = ROOT / "registry" / "data" / "controlled-runs" / "timeouts-nvidia-h200.tsv"
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def prose(name: str) -> str:
    return " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())


def test_the_reruns_doc_gives_the_shipped_timeouts_file():
    """docs/reruns.md, "A job that does not finish": the jobs the shipped timeouts file holds."""
    with TIMEOUTS.open(newline="") as lines:
        rows = list(csv.DictReader(lines, delimiter="\t"))
    memory = [row for row in rows if row["cause"] == "out of memory"]
    timed_out = [row for row in rows if row["cause"] != "out of memory"]
    text = prose("reruns.md")
    assert (
        f"The shipped file holds {WORDS[len(rows)]} jobs: {WORDS[len(memory)]} out of memory" in text
        and f"and {WORDS[len(timed_out)]} past the time limit" in text
    )
    (orpo_batch,) = {int(float(row["x_value"])) for row in memory}
    assert f"Hugging Face's ORPO loss, full pass, at B = {orpo_batch}," in text
    first, *others = sorted(timed_out, key=lambda row: row["started_at"])
    assert (
        f"at L = {int(float(first['x_value'])):,}, which ran {float(first['ran_s']):.0f} s on "
        f"{first['gpu_uuid'][:12]} ({first['started_at'][:10]})" in text
    )
    assert len({row["gpu_uuid"] for row in others}) == 1
    ran = {int(float(row["ran_s"])) for row in others}
    assert len(ran) == 1
    assert (
        f"each killed at {ran.pop()} s on {others[0]['gpu_uuid'][:12]} ({others[0]['started_at'][:10]})"
        in text
    )


def test_the_performance_doc_describes_the_synthetic_registry_bench_generate_builds():
    """docs/performance.md, "The synthetic registry": its counts are bench/generate.py's."""
    from bench import generate

    _, bases = generate._bases()
    text = prose("performance.md")
    assert f"The bundled rows are reduced to {len(bases)} distinct benchmarks" in text
    assert f"then repeated on {len(generate.GPUS)} GPUs" in text
    versions = generate.VERSIONS
    assert f"under {len(versions)} Liger versions ({versions[0]} … {versions[-1]}:" in text
    assert f"`liger.parse_file` on {generate.CHUNK:,}-row chunks" in text


def test_the_speed_of_light_doc_gives_the_reports_implausible_runs():
    """docs/speed-of-light.md quotes the dated report (itself checked equal to the command's output
    on everything that ships): how many runs are implausible and how far below their floor."""
    report = (ROOT / "docs" / "reports" / "2026-12-06-speed-of-light.md").read_text(encoding="utf-8")
    found = re.findall(r": ([\d.]+) MB \((\d+)% of its memory floor\)", report)
    ratios = [int(percent) / 100 for _, percent in found]
    text = prose("speed-of-light.md")
    assert f"The {len(found)} implausible runs are all peak-memory runs" in text
    assert f"whose peaks are {min(ratios):.0f} to {max(ratios):.0f} times below the input alone" in text
    relu = re.findall(
        r"relu_squared/full-memory/liger/\S+: ([\d.]+) MB \((\d+)% of its memory floor\)", report
    )
    peak, _ = max(relu, key=lambda found: int(found[1]))  # the one furthest below its floor
    assert f'relu_squared\'s liger peak reads {float(peak):.4f} "MB"' in text


def test_the_speed_of_light_doc_gives_the_shipped_h200_ceilings():
    shipped = json.loads((ROOT / "registry" / "data" / "ceilings" / "nvidia-h200.json").read_text())
    datasheet = json.loads((ROOT / "registry" / "data" / "gpu-ceilings.json").read_text())
    h200 = next(entry for key, entry in _products(datasheet) if key == "nvidia-h200")
    copy, gemm = shipped["memory_bandwidth"], shipped["bf16_dense"]
    copy_sheet, gemm_sheet = h200["memory_bandwidth"]["value"], h200["dense_tflops"]["bf16"]["value"]
    by_n = gemm["median_by_n"]
    text = prose("speed-of-light.md")
    assert (
        f"copy **{copy['median']:,.0f} GB/s** (95% interval {copy['ci95'][0]:,.0f}–{copy['ci95'][1]:,.0f}; "
        f"{copy['median'] / copy_sheet:.0%} of the datasheet's {copy_sheet:,}) and bf16 GEMM "
        f"**{gemm['median']:.0f} TFLOP/s** at {shipped['sizes']['gemm_n']}³ ({gemm['ci95'][0]:.0f}–"
        f"{gemm['ci95'][1]:.0f}; {gemm['median'] / gemm_sheet:.0%} of {gemm_sheet}; 8192³ gave {by_n['8192']:.0f} "
        f"and 16384³ {by_n['16384']:.0f} on that card)" in text
    )
    assert f"`registry/data/ceilings/nvidia-h200.json` ({shipped['measured_at'][:10]}, torch 2.11" in text


def _products(datasheet: dict):
    """The datasheet file's products by slug, wherever the file nests them."""
    for key, value in datasheet.items():
        if isinstance(value, dict):
            if "memory_bandwidth" in value:
                yield key, value
            else:
                yield from _products(value)


def test_the_readme_names_the_cards_of_kernelbenchs_report():
    """The README's "six H100 and two H200 cards" are the dated report's count of cards by model."""
    report = (ROOT / "docs" / "reports" / "2026-12-06-h200-h100-kernelbench.md").read_text(encoding="utf-8")
    h100, h200 = re.search(
        r"on \d+ cards \(NVIDIA H100 80GB HBM3: (\d+), NVIDIA H200: (\d+)\)", report
    ).groups()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (
        f"KernelBench's on {WORDS[int(h100)]} H100 and {WORDS[int(h200)]} H200 cards on 2026-12-06" in readme
    )


def settings_defaults() -> dict[str, float]:
    """Each environment variable's literal numeric default in kernelindex/settings.py."""
    source = (ROOT / "kernelindex" / "settings.py").read_text()
    found = re.findall(r'_env\(env\.\w+, "([A-Z0-9_]+)", default=(-?[\d.]+)\)', source)
    return {name: float(value) for name, value in found}


def test_the_settings_tables_give_the_settings_defaults():
    """docs/reruns.md's and docs/deploy.md's tables of settings: a numeric default is the code's."""
    defaults = settings_defaults()
    assert defaults
    checked = 0
    for name in ("reruns.md", "deploy.md"):
        for line in (ROOT / "docs" / name).read_text(encoding="utf-8").splitlines():
            row = re.match(r"\| ((?:`[A-Z0-9_]+`(?:, )?)+) \| `?([\d.,]+(?:, [\d.]+)*)`? \|", line)
            if not row:
                continue
            names = re.findall(r"`([A-Z0-9_]+)`", row[1])
            values = [float(value.replace(",", "")) for value in re.split(r", (?=\d)", row[2])]
            if len(values) != len(names):
                values = [float(row[2].replace(",", ""))]
            for variable, value in zip(names, values, strict=False):
                if variable in defaults:
                    assert defaults[variable] == value, (
                        f"docs/{name}: {variable} is {value}, the code's {defaults[variable]}"
                    )
                    checked += 1
    assert checked >= 10


def test_the_glossary_gives_the_settings_thresholds():
    defaults = settings_defaults()
    text = prose("glossary.md")
    tolerance, threshold, p_value = (
        defaults[n] for n in ("RERUN_TOLERANCE", "CHANGE_THRESHOLD", "CHANGE_P_VALUE")
    )
    assert f"(±{tolerance:.0%} unless the page says otherwise)" in text
    assert f"p ≤ {p_value:g} and the values are at least {threshold:.0%} apart" in text
    assert f"by at least {threshold:.0%} with their ranges apart" in text
