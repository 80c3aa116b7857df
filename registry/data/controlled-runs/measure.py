"""Measure a kernel's workloads on this host's GPU through the real pipeline, rerun the results,
and export them: the program that made the files beside it.

Everything runs here, in one process tree: SQLite, kombu's filesystem broker, and one real
Celery worker consuming gpu.<slug> and default. Measure jobs are requested with the same service
as the admin (`measure_request`), reruns with `rerun_request`; the worker claims, runs the
harness, and `rerun_record_result` applies the evidence rule.

    python registry/data/controlled-runs/measure.py --out DIR [--kernel geglu]
        [--providers huggingface,liger] [--reruns N] [--gpu SLUG] [--import CSV] [--workload SLUG]

Run it from the repository root on the GPU host, after `manage.py fetch_harness`.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FINISHED = {"succeeded", "diverged", "failed", "cancelled"}


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--kernel", default="geglu")
    parser.add_argument("--providers", default="huggingface,liger")
    parser.add_argument("--reruns", type=int, default=-1, help="How many measured runs to rerun (-1: all).")
    parser.add_argument("--gpu", default="", help="GPU model slug (default: this host's).")
    parser.add_argument("--import", dest="extra_csv", default="", help="Another Liger CSV to import first.")
    parser.add_argument("--workload", action="append", default=[], help="Workload slug; repeatable.")
    parser.add_argument("--deadline", type=float, default=540, help="Seconds before it stops waiting.")
    return parser.parse_args()


def django_setup(var_dir: Path) -> None:
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("SECRET_KEY", "controlled-measurement-run-not-secret")
    os.environ["KERNELINDEX_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'db.sqlite3'}"
    os.environ["CELERY_BROKER_URL"] = "filesystem://"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def worker_start(gpu: str, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "kernelindex", "worker", "-Q", f"gpu.{gpu},default"]
    command += ["-c", "1", "--prefetch-multiplier", "1", "-n", f"{gpu}@%h", "-l", "info"]
    return subprocess.Popen(command, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait(jobs, deadline: float, what: str) -> None:
    from registry.models import RerunJob

    pks = [job.pk for job in jobs]
    while time.monotonic() < deadline:
        states = list(RerunJob.objects.filter(pk__in=pks).values_list("state", flat=True))
        done = sum(state in FINISHED for state in states)
        print(f"{what}: {done}/{len(pks)} finished", flush=True)
        if done == len(pks):
            return
        time.sleep(5)
    print(f"{what}: deadline reached; exporting what finished", flush=True)


def export(out: Path, gpu: str, kernel: str) -> None:
    from registry.models import BenchmarkRun
    from registry.reruns.controlled import controlled_runs_export
    from registry.reruns.services import CONTROLLED_SOURCE

    runs = BenchmarkRun.objects.filter(
        source__slug=CONTROLLED_SOURCE["slug"], environment__slug=gpu, kernel__slug=kernel
    ).order_by("external_id")
    document = controlled_runs_export(runs=runs)
    path = out / f"{gpu}-{kernel}.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{len(document['runs'])} run(s) exported to {path}", flush=True)


def summary(gpu: str, kernel: str) -> None:
    from registry.models import RerunJob

    print("pass metric provider x median p20 p80 samples | job state deviation", flush=True)
    for job in RerunJob.objects.filter(gpu_slug=gpu, kernel__slug=kernel).order_by("kind", "metric", "pk"):
        print(
            job.kind,
            job.operation_mode,
            job.metric,
            job.provider,
            job.workload.x_value,
            job.median,
            job.p20,
            job.p80,
            len(job.samples),
            "|",
            job.state,
            job.deviation,
            (job.error or "")[:200],
            flush=True,
        )


def main() -> None:
    args = arguments()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline
    django_setup(Path(tempfile.mkdtemp(prefix="kernelindex-")))
    from django.core.management import call_command

    from registry.reruns.harness import local_gpu_slug
    from registry.models import BenchmarkRun, Kernel
    from registry.reruns.services import measure_request, rerun_request
    from registry.services import liger_import
    from registry.services.imports import BUNDLED_LIGER_CSV

    gpu = args.gpu or local_gpu_slug()
    call_command("migrate", verbosity=0)
    print(liger_import(path=BUNDLED_LIGER_CSV), flush=True)
    if args.extra_csv:
        print(liger_import(path=args.extra_csv), flush=True)
    worker = worker_start(gpu, args.out / "worker.log")
    try:
        kernel = Kernel.objects.get(slug=args.kernel)
        workloads = kernel.workloads.filter(slug__in=args.workload) if args.workload else None
        providers = args.providers.split(",")
        reason = f"Controlled measurement of the bundled {args.kernel} workloads on {gpu}"
        jobs = measure_request(
            kernel=kernel,
            providers=providers,
            operation_modes=["forward", "backward", "full"],
            metrics=["latency"],
            gpu_slug=gpu,
            workloads=workloads,
            reason=reason,
        ).created
        if gpu != "cpu":
            jobs += measure_request(
                kernel=kernel,
                providers=providers,
                operation_modes=["full"],
                metrics=["memory"],
                gpu_slug=gpu,
                workloads=workloads,
                reason=reason,
            ).created
        wait(jobs, deadline, "measure jobs")
        export(args.out, gpu, args.kernel)
        measured = BenchmarkRun.objects.filter(measured_by_jobs__in=jobs, evidence_level="measured").order_by(
            "-workload__x_value", "metric", "operation_mode", "implementation__provider"
        )
        chosen = list(measured if args.reruns < 0 else measured[: args.reruns])
        reruns = [rerun_request(run=run, reason="Rerun of a controlled measurement") for run in chosen]
        wait(reruns, deadline, "reruns")
        export(args.out, gpu, args.kernel)
        summary(gpu, args.kernel)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


if __name__ == "__main__":
    main()
