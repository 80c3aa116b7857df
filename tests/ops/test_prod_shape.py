"""scripts/prod.py brings up gunicorn, a Celery worker and beat against PostgreSQL and Redis; a
sync sent to the worker lands in the database, and the web answers its probes and metrics.

Needs PostgreSQL and Redis (CI has both); skipped on the embedded defaults.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "prod-shape-metrics-token"

pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis://"),
        reason="the production shape needs PostgreSQL and Redis (DATABASE_URL, CELERY_BROKER_URL)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url(name: str) -> str:
    s = connection.settings_dict
    credentials = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{credentials}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{name}"


def _get(url: str, **headers) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def shape(tmp_path, pypi):
    name = f"{connection.settings_dict['NAME']}_prod"
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(name),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CACHE_URL": settings.CELERY_BROKER_URL,
        "KERNELINDEX_VAR_DIR": str(tmp_path / "var"),
        "KERNELINDEX_PYTHON": sys.executable,
        "PYPI_URL": pypi.url,
        "METRICS_TOKEN": TOKEN,
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    with psycopg.connect(_database_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def prod(*args):
        return subprocess.run(
            [sys.executable, ROOT / "scripts" / "prod.py", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    started = prod("up", "--port", str(port), "--web-workers", "2", "--concurrency", "1")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield {
            "url": f"http://127.0.0.1:{port}",
            "env": env,
            "database": _database_url(name),
            "prod": prod,
            "log": tmp_path / "var" / "prod" / "log",
        }
    finally:
        stopped = prod("down")
        with psycopg.connect(_database_url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(prod("status").stdout) == {}


class TestProductionShapeOnOneMachine:
    def test_web_worker_and_beat_serve_probes_metrics_and_a_queued_sync(self, shape, pypi):
        pypi.add("0.8.5")
        assert _get(shape["url"] + "/healthz") == (200, '{"status": "ok"}')
        status, body = _get(shape["url"] + "/readyz")
        assert status == 200, body

        queued = subprocess.run(
            [sys.executable, "manage.py", "sync_liger", "--queue"],
            env=shape["env"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert queued.returncode == 0, queued.stderr
        with psycopg.connect(shape["database"], autocommit=True) as db:
            for _ in range(120):
                row = db.execute("SELECT status, release FROM registry_sourcesync").fetchone()
                if row and row[0] != "running":
                    break
                time.sleep(0.5)
            runs = db.execute("SELECT count(*) FROM registry_benchmarkrun").fetchone()[0]
        assert row == ("imported", "0.8.5")
        assert runs == 26

        status, metrics = _get(shape["url"] + "/metrics", Authorization=f"Bearer {TOKEN}")
        assert status == 200
        assert 'kernelindex_runs{evidence_level="reported",source="liger-kernel"} 26.0' in metrics
        assert 'view="healthz"' in metrics  # counted by one gunicorn worker, reported by any
        assert _get(shape["url"] + "/metrics")[0] == 403

        task_lines = [
            json.loads(line)
            for line in (shape["log"] / "worker.log").read_text().splitlines()
            if line.startswith("{") and '"task_name": "registry.sync_liger"' in line
        ]
        assert task_lines and all(line["task_id"] for line in task_lines)
        assert any("imported all_benchmark_data_cutile.csv" in line["message"] for line in task_lines)
