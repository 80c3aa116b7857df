"""KernelIndex as deployed, on 127.0.0.1: gunicorn with the production settings (DEBUG off, a
SECRET_KEY, ALLOWED_HOSTS=127.0.0.1; SSL redirect off because nothing terminates TLS here), a
Celery worker on the CPU queue with beat beside it, on a PostgreSQL database and a Redis broker
given by URL. Used by the load run (bench/load.py) and the PostgreSQL restart fault test.

Every process is started in its own process group and stopped by the `Stack` that started it."""

import csv
import http.client
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_CSV = ROOT / "registry" / "sources" / "liger" / "data" / "all_benchmark_data.csv"
# A CPU run whose rerun takes a few seconds (about 70 ms a call), recorded near what a CPU measures.
SLOW_CPU_ROW = {
    "kernel_name": "geglu",
    "kernel_provider": "huggingface",
    "kernel_operation_mode": "forward",
    "metric_name": "speed",
    "metric_unit": "ms",
    "x_name": "T",
    "x_label": "sequence length",
    "x_value": "256",
    "y_value_50": "70.0",
    "y_value_20": "68.0",
    "y_value_80": "72.0",
    "extra_benchmark_config_str": '{"bsz": 2, "hidden_size": 512, "intermediate_size": 1024, '
    '"hidden_act": "gelu_pytorch_tanh", "dtype": "torch.float32"}',
    "gpu_name": "cpu",
    "timestamp": "2025-01-02 03:04:05",
    "liger_version": "0.8.4",
}
# The same workload by another provider, faster: the slow run's compare page has a best to show.
FAST_CPU_ROW = {**SLOW_CPU_ROW, "kernel_provider": "liger", "y_value_50": "60.0", "y_value_20": "59.0"}
FAST_CPU_ROW["y_value_80"] = "61.0"
# Short enough for a run of minutes, each still longer than what it bounds.
WORKER_ENV = {
    "JOB_HEARTBEAT_INTERVAL": "0.5",
    "JOB_STALE_AFTER": "3",
    "JOB_HARNESS_TIMEOUT": "120",
    "CELERY_VISIBILITY_TIMEOUT": "300",
    "CELERY_UNACKED_RESTORE_INTERVAL": "1",
    "JOB_RECONCILE_INTERVAL": "2",
    "JOB_RESEND_AFTER": "30",
    # CPU wall clock on a loaded machine: agree within a factor of 5 (see tests/reruns/worker.py).
    "RERUN_TOLERANCE": "4.0",
}


def static_ready() -> bool:
    """collectstatic has run since the project's own static files last changed."""
    manifest = ROOT / "staticfiles" / "staticfiles.json"
    if not manifest.exists():
        return False
    sources = [p for p in (ROOT / "static").rglob("*") if p.is_file()]
    return all(p.stat().st_mtime <= manifest.stat().st_mtime for p in sources)


def data_csv(path: Path, *, bundled: bool, geglu_only: bool = False) -> Path:
    """The bundled file (or only its geglu rows, or none of it) plus the slow CPU row."""
    with BUNDLED_CSV.open(newline="") as source:
        reader = csv.DictReader(source)
        rows = [r for r in reader if bundled and (not geglu_only or r["kernel_name"] == "geglu")]
        fields = reader.fieldnames
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows([*rows, SLOW_CPU_ROW, FAST_CPU_ROW])
    return path


class Stack:
    def __init__(self, folder: Path, *, database_url: str, broker_url: str, port: int, web_workers: int = 2):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port, self.web_workers = port, web_workers
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))},
            "DJANGO_SETTINGS_MODULE": "kernelindex.settings",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0",
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker_url,
            "CACHE_URL": "",
            "KERNELINDEX_VAR_DIR": str(self.folder / "var"),
            "LOG_LEVEL": "INFO",
            # Every client of a Stack (locust's users, a fault test's browsing loop) comes from
            # 127.0.0.1, one bucket of the anonymous API throttle; served from the page cache it
            # passes 600 a minute within seconds, and a 429 there is the throttle, not a fault.
            "API_ANON_RATE": "1000000/minute",
            **WORKER_ENV,
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self.offsets: dict[str, int] = {}

    def manage(self, *args, timeout: float = 600) -> str:
        out = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
            )
        return out.stdout

    def prepare(self, csv_path: Path) -> None:
        """Tables, static files (the manifest storage needs them with DEBUG off) and the data."""
        self.manage("migrate", "--noinput", "-v0")
        if not static_ready():
            self.manage("collectstatic", "--noinput", "-v0")  # a minute or more: it compresses
        self.manage("import_liger", str(csv_path))
        self.worker_key_register()

    def worker_key_register(self) -> None:
        """The worker's own key, made and registered for gpu.cpu as docs/deploy.md says."""
        key = self.folder / "worker.key"
        key.unlink(missing_ok=True)
        public = self.manage("worker_key", "generate", "--out", str(key)).strip()
        name = f"stack-cpu-{secrets.token_hex(4)}"
        self.manage("worker_key", "register", name, "--gpu", "cpu", "--public-key", public)
        self.env.update({"WORKER_NAME": name, "WORKER_KEY_FILE": str(key)})

    def _start(self, name: str, command: list[str]) -> None:
        path = self.folder / f"{name}.log"
        self.offsets[name] = path.stat().st_size if path.exists() else 0
        log = path.open("ab")
        self.processes[name] = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log(self, name: str) -> str:
        """What the process of that name wrote since it was last started."""
        path = self.folder / f"{name}.log"
        if not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(self.offsets.get(name, 0))
            return log.read().decode(errors="replace")

    def start_web(self) -> None:
        self._start(
            "gunicorn",
            [sys.executable, "-m", "gunicorn", "kernelindex.wsgi", "-b", f"127.0.0.1:{self.port}"]
            + ["-w", str(self.web_workers), "--timeout", "60", "--access-logfile", "-"],
        )
        self._wait(lambda: self.status("/") == 200, 90, "gunicorn to answer")

    def start_worker(self) -> None:
        self._start(
            "worker",
            [sys.executable, "-m", "celery", "-A", "kernelindex", "worker", "-Q", "gpu.cpu,default"]
            + ["-c", "1", "--prefetch-multiplier", "1", "-B", "-s", str(self.folder / "beat-schedule")]
            + [
                "-n",
                f"stack-{secrets.token_hex(4)}@%h",
                "-l",
                "info",
                "--without-gossip",
                "--without-mingle",
            ],
        )
        self._wait(lambda: " ready." in self.log("worker"), 90, "the worker to be ready")

    def stop(self, name: str | None = None) -> None:
        for key in [name] if name else list(self.processes):
            process = self.processes.pop(key, None)
            if process is None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)

    def status(self, path: str, timeout: float = 30) -> int:
        """The HTTP status of a GET, or 0 when the connection itself failed."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            connection.close()

    def _wait(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {name}\n{self.log(name)[-3000:]}" for name in self.processes)
        raise RuntimeError(f"timed out waiting for {what}\n{logs}")
