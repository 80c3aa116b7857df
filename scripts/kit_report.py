#!/usr/bin/env python3
"""The reproduction kit on an H200, from its result files (bench/results/kit-h200/*.json), as
Markdown on standard output: what each file measured, and the verdict the site gives it against
the run it reproduces, computed as the site computes it when the file is filed
(`run_judgement`, attestations.services) from the shipped controlled runs of that kernel
(registry/data/controlled-runs/).

    .venv/bin/python scripts/kit_report.py > docs/reports/2026-12-01-h200-kit.md

Run on its own it migrates a throwaway SQLite database in a temporary folder and loads the one
kernel's controlled runs into it; tests/harness/test_kit_report.py calls `report()` on the test
database instead.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "kit-h200"
CONTROLLED = ROOT / "registry" / "data" / "controlled-runs"


def result_files(folder: Path = RESULTS) -> list[dict]:
    return [json.loads(path.read_text()) | {"file": path.name} for path in sorted(folder.glob("*.json"))]


def controlled_files(results: list[dict]) -> list[Path]:
    """The shipped controlled-runs files of the kernels the result files reproduce."""
    kernels = sorted({result["spec"]["job"]["kernel"] for result in results})
    gpus = sorted({result["environment"]["gpu_slug"] for result in results})
    return [CONTROLLED / f"{gpu}-{kernel}.json.gz" for gpu in gpus for kernel in kernels]


def _ms(value: float) -> str:
    return f"{value:.3f} ms"


def section(result: dict) -> str:
    from registry.models import BenchmarkRun
    from registry.reruns.judgement import judgement_note, run_judgement
    from registry.stats import medians

    run = BenchmarkRun.objects.select_related("protocol").get(digest=result["spec"]["run"]["digest"])
    samples = result["samples"]
    median, p20, p80 = medians.quantiles(samples)
    judged = run_judgement(run, samples=samples, upstream=result["upstream"], figures=(median, p20, p80))
    sampling, environment, job = result["sampling"], result["environment"], result["spec"]["job"]
    measured_by = judged.measured_by
    card = (measured_by.gpu_uuid if measured_by else "") or "not recorded"
    return "\n".join(
        [
            f"## `{result['file']}`: {job['kernel']} {job['operation_mode']}, {job['provider']}, "
            f"{job['x_name']} = {job['x_value']:,}",
            "",
            f"- The run: `{run.external_id}`, protocol `{run.protocol.name}`, median {_ms(run.median)}, "
            f"measured on card {card}.",
            f"- The kit {result['kit']['version']} on {environment['gpu_name']} card {result['gpuUuid']} "
            f"(driver {environment['driver']}, CUDA {environment['cuda']}, torch {environment['torch']}, "
            f"triton {environment['triton']}), from {result['startedAt']} to {result['finishedAt']}: "
            f"{len(samples)} samples, median {_ms(median)} (p20 {_ms(p20)}, p80 {_ms(p80)}), stopped by "
            f"{sampling['stop']} ({sampling['precision']:.2%} against a target of "
            f"{sampling['target_precision']:.2%}).",
            f"- Its verdict, as the site computes it when the file is filed: **{judged.verdict}**. "
            + judgement_note(judged, subject="The kit's file"),
            "",
        ]
    )


def report(results: list[dict] | None = None) -> str:
    results = result_files() if results is None else results
    head = [
        "# The reproduction kit on an H200, 2026-12-01",
        "",
        "Written by `scripts/kit_report.py` from the kit's result files in `bench/results/kit-h200/` "
        "and the shipped controlled runs they reproduce; `tests/harness/test_kit_report.py` checks "
        "that this file is what the script prints.",
        "",
        "A one-GPU H200 host that reaches no package index; the site served by `runserver` on that "
        "host, the kit installed from the URL its spec endpoint gave, with `--no-index --find-links "
        '.whl`, as `docs/gpu-hosts.md` ("Reproducing a run on such a host") shows. Each file was '
        "filed on its run, pending, with the verdict below. A run of the older protocol is judged by "
        "upstream's own figure, which rests on one timed call; a `kernelindex-cuda-v1` run by the two "
        'sides\' samples (`docs/protocol.md`, "Verdicts").',
        "",
    ]
    return "\n".join(head + [section(result) for result in results]).rstrip("\n") + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        os.environ.update(
            DATABASE_URL=f"sqlite:///{folder}/kit-report.sqlite3",
            KERNELINDEX_VAR_DIR=folder,
            DEBUG="1",
            CACHE_URL="locmemcache://",
            CELERY_BROKER_URL="memory://",
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from registry.reruns.controlled import controlled_runs_load

        results = result_files()
        for path in controlled_files(results):
            controlled_runs_load(path=path)
        sys.stdout.write(report(results))


if __name__ == "__main__":
    main()
