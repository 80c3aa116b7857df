"""Figures in docs prose counted from files the repository ships, read again from those files."""

import csv

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
