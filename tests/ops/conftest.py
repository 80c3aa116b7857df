"""A liger-kernel-like source distribution, served from 127.0.0.1 in the shape of PyPI's JSON API
as a mirror serves it: the project document only, with file URLs relative to it.

Never the live registry: tests point settings.PYPI_URL at this server.
"""

import hashlib
import io
import json
import tarfile
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DATA_FILES = ("all_benchmark_data.csv", "all_benchmark_data_cutile.csv", "all_benchmark_data_cutedsl.csv")


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def release_files() -> dict[str, bytes]:
    """The three data files of the 0.8.5 extract."""
    return {name: fixture_bytes(name) for name in DATA_FILES}


def sdist_build(version: str, files: dict[str, bytes]) -> bytes:
    """A .tar.gz laid out like liger-kernel's sdist: liger_kernel-<v>/benchmark/data/*.csv."""
    root = f"liger_kernel-{version}"
    members = {
        f"{root}/PKG-INFO": f"Metadata-Version: 2.1\nName: liger-kernel\nVersion: {version}\n".encode(),
        f"{root}/LICENSE": fixture_bytes("LICENSE"),
        f"{root}/benchmark/scripts/utils.py": b"QUANTILES = [0.5, 0.2, 0.8]\n",
        **{f"{root}/benchmark/data/{name}": data for name, data in files.items()},
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class FakePyPI:
    """Releases in the order added; the last one is the newest."""

    def __init__(self):
        self.releases: dict[str, dict] = {}
        self.requests: list[str] = []
        self.url = ""

    def add(
        self,
        version: str,
        files: dict[str, bytes] | None = None,
        *,
        archive: bytes | None = None,
        sha256: str | None = None,
    ) -> None:
        archive = archive if archive is not None else sdist_build(version, files or release_files())
        self.releases[version] = {
            "filename": f"liger_kernel-{version}.tar.gz",
            "archive": archive,
            "sha256": sha256 or hashlib.sha256(archive).hexdigest(),
            # Published now: a release is the newest thing the registry has heard of.
            "uploaded": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }

    def downloads(self) -> list[str]:
        return [path for path in self.requests if path.startswith("/packages/")]

    def files(self, version: str) -> list[dict]:
        release = self.releases[version]
        return [
            {
                "packagetype": "bdist_wheel",
                "filename": f"liger_kernel-{version}-py3-none-any.whl",
                "url": "../../packages/missing.whl",
                "digests": {"sha256": "0" * 64},
            },
            {
                "packagetype": "sdist",
                "filename": release["filename"],
                # As a mirror gives it: relative to the project document (/pypi/liger-kernel/json).
                "url": f"../../packages/{release['filename']}",
                "digests": {"sha256": release["sha256"]},
                "upload_time_iso_8601": release["uploaded"],
                "yanked": False,
            },
        ]

    def document(self) -> dict:
        """The project document, the one thing a mirror serves (no per-version endpoint)."""
        newest = list(self.releases)[-1]
        return {
            "info": {"name": "liger-kernel", "version": newest},
            "urls": self.files(newest),
            "releases": {version: self.files(version) for version in self.releases},
        }


def _handler(pypi: FakePyPI):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            pypi.requests.append(self.path)
            parts = self.path.strip("/").split("/")
            if parts == ["pypi", "liger-kernel", "json"] and pypi.releases:
                return self._send(json.dumps(pypi.document()).encode(), "application/json")
            if parts[0] == "packages":
                for release in pypi.releases.values():
                    if release["filename"] == parts[-1]:
                        return self._send(release["archive"], "application/gzip")
            self.send_error(404)

        def _send(self, body: bytes, content_type: str):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


@pytest.fixture
def pypi(settings):
    fake = FakePyPI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.PYPI_URL = fake.url
    settings.PYPI_TIMEOUT = 5
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def celery_eager():
    """Tasks sent with .delay() run in-process, as a worker would run them."""
    from kernelindex.celery import app

    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture
def fixture_runs(tmp_path, db):
    """The 12 runs of the main extract (GeGLU on an A100, JSD on a B200)."""
    from registry.models import BenchmarkRun
    from registry.sources.liger.services import liger_import

    path = tmp_path / "all_benchmark_data.csv"
    path.write_bytes(fixture_bytes("all_benchmark_data.csv"))
    liger_import(path=path, release="0.8.5")
    return BenchmarkRun.objects.select_related("environment", "implementation").order_by("pk")


@pytest.fixture
def jobs(fixture_runs):
    """Three reruns through the reruns services: one queued, one running whose worker stopped
    beating ten minutes ago, one that failed after 90 seconds."""
    from datetime import timedelta

    from django.utils import timezone

    from registry.reruns.models import RerunJob
    from registry.reruns.services import job_claim, job_fail, rerun_request

    a100 = [r for r in fixture_runs if r.environment.slug == "nvidia-a100-sxm4-80gb"]
    b200 = [r for r in fixture_runs if r.environment.slug == "nvidia-b200"]
    queued = rerun_request(run=a100[0], reason="check")
    stuck = rerun_request(run=a100[1], reason="check")
    job_claim(job_id=stuck.pk, gpu_slug="nvidia-a100-sxm4-80gb", worker_host="gpu-a1")
    RerunJob.objects.filter(pk=stuck.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=10))
    failed = rerun_request(run=b200[0], reason="check")
    job_claim(job_id=failed.pk, gpu_slug="nvidia-b200", worker_host="gpu-b1")
    job_fail(job_id=failed.pk, error="CUDA out of memory")
    RerunJob.objects.filter(pk=failed.pk).update(started_at=timezone.now() - timedelta(seconds=90))
    return {"queued": queued, "stuck": stuck, "failed": failed}
