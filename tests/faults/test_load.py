"""Item 14, the short version CI runs: 20 locust users for 20 s against gunicorn with the
production settings on PostgreSQL, while a rerun job runs; zero failed requests and the job
completes. The full run (50 users, 3 minutes, all the bundled data) is `python bench/load.py`;
its figures are in docs/reliability.md."""

import importlib.util
import shutil

import pytest
from django.db import connection

from bench.load import load_run
from tests.faults.support import figure

pytestmark = [pytest.mark.load, pytest.mark.worker]


def postgres_server() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER'] or 'postgres'}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"


def test_twenty_users_browse_without_a_failure_while_a_rerun_job_completes(tmp_path, db):
    if connection.vendor != "postgresql":
        pytest.skip("the load test runs the site on PostgreSQL (DATABASE_URL=postgres://...)")
    if importlib.util.find_spec("locust") is None or not shutil.which("redis-server"):
        pytest.skip("needs locust (requirements-test.txt) and redis-server")

    result = load_run(
        postgres=postgres_server(),
        users=20,
        duration_s=20,
        geglu_only=True,
        folder=tmp_path,
        db_prefix=connection.settings_dict["NAME"],  # the test database's name: its own per xdist worker
    )

    assert result["requests"] > 100
    assert result["failures"] == 0, result["failure_kinds"]
    assert result["server_errors"] == 0
    assert result["jobs"]["states"] and set(result["jobs"]["states"]) <= {"succeeded", "diverged"}
    figure(
        "item14.load.short",
        {
            k: result[k]
            for k in ("users", "duration_s", "requests", "error_rate", "p50_ms", "p95_ms", "p99_ms")
        },
        jobs=result["jobs"],
    )
