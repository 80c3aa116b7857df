"""A pg_dump restored into a fresh PostgreSQL database holds every row, digests unchanged.

Runs where the suite runs on PostgreSQL (CI does); skipped on SQLite, where there is no pg_dump.
Every model of the project's apps that exists is checked: runs, imports and syncs, rerun jobs,
and (once those apps land) attestations, issue reports and audit entries.
"""

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.apps import apps
from django.db import connection

from registry import digests
from registry.models import BenchmarkRun
from registry.sources.liger.services import liger_import
from tests.ops.conftest import fixture_bytes

ROOT = Path(__file__).resolve().parents[2]
PROJECT_APPS = ("registry", "reruns", "attestations")  # reruns: the rerun app, moved out of registry

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="backups are pg_dump / pg_restore: needs DATABASE_URL on PostgreSQL",
)


def _url(database: str) -> str:
    s = connection.settings_dict
    credentials = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{credentials}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{database}"


def _backup(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, ROOT / "scripts" / "backup.py", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tables() -> list:
    models = [
        m for config in apps.get_app_configs() if config.label in PROJECT_APPS for m in config.get_models()
    ]
    return [m for m in models if not m._meta.proxy and m._meta.managed]


def _snapshot(cursor, model) -> dict:
    """{pk: (digest fields..., md5 of the whole row)} for one table."""
    table, pk = model._meta.db_table, model._meta.pk.column
    digest_columns = [
        f.column for f in model._meta.concrete_fields if f.name == "digest" or f.name.endswith("_digest")
    ]
    columns = ", ".join([f'"{c}"' for c in digest_columns] + ["md5(t::text)"])
    cursor.execute(f'SELECT "{pk}", {columns} FROM "{table}" t ORDER BY "{pk}"')
    return {row[0]: row[1:] for row in cursor.fetchall()}


@pytest.fixture
def restored_database():
    name = f"{connection.settings_dict['NAME']}_restore_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def committed_jobs(jobs):
    """The jobs fixture in a committing test sends real messages to the GPU queues; take them
    back so no later test or worker finds them."""
    from kernelindex.celery import app

    yield jobs
    with app.connection_for_write() as broker:
        for queue in {job.queue for job in jobs.values()}:
            broker.default_channel.queue_purge(queue)


@pytest.fixture
def moderation_history(fixture_runs, django_user_model):
    """An approved reproduction, a pending note and an issue report, with their audit entries,
    through the attestations services."""
    from attestations import services

    author = django_user_model.objects.create_user(
        username="ada", email="ada@example.org", password="pw-ada-1234"
    )
    admin = django_user_model.objects.create_superuser(
        username="root", email="root@example.org", password="pw-root-1234"
    )
    run = fixture_runs.get(
        external_id__startswith="geglu/backward/huggingface/nvidia-a100-sxm4-80gb/batch8-hidden4096-intermediate11008-seq8192"
    )
    reproduction = services.attestation_submit(
        run=run,
        author=author,
        kind="reproduction",
        median=144.9,
        p20=144.1,
        p80=145.3,
        unit="ms",
        gpu_product="NVIDIA A100-SXM4-80GB",
        text="Same figure on our A100.",
    )
    services.attestation_approve(attestation=reproduction, moderator=admin, reason="Matches.")
    services.attestation_submit(run=run, author=author, kind="note", text="Timed once: the op is over 10 ms.")
    services.issue_report_create(run=run, reporter=author, category="other", description="Revision unknown.")


@pytest.mark.django_db(transaction=True)
class TestRestoreFromDump:
    def test_every_row_comes_back_with_its_digest_unchanged(
        self, tmp_path, committed_jobs, moderation_history, restored_database
    ):
        variant = tmp_path / "all_benchmark_data_cutile.csv"
        variant.write_bytes(fixture_bytes("all_benchmark_data_cutile.csv"))
        liger_import(path=variant, release="0.8.5")
        with connection.cursor() as cursor:
            before = {m._meta.label: _snapshot(cursor, m) for m in _tables()}
        assert len(before["registry.BenchmarkRun"]) == 22 and len(before["reruns.RerunJob"]) == 3
        assert len(before["attestations.Attestation"]) == 2 and len(before["attestations.IssueReport"]) == 1
        assert len(before["attestations.AuditEntry"]) >= 4

        dumped = _backup(
            "dump", "--database-url", _url(connection.settings_dict["NAME"]), "--out", tmp_path / "backups"
        )
        assert dumped.returncode == 0, dumped.stderr
        archive = Path(dumped.stdout.strip().splitlines()[-1])
        restored = _backup("restore", archive, "--database-url", _url(restored_database), "--create")
        assert restored.returncode == 0, restored.stderr

        with psycopg.connect(_url(restored_database)) as copy, copy.cursor() as cursor:
            after = {m._meta.label: _snapshot(cursor, m) for m in _tables()}
            cursor.execute('SELECT external_id, digest, manifest FROM "registry_benchmarkrun"')
            runs = cursor.fetchall()
        assert after == before
        # The digests still are the digests of the manifests they stand for.
        assert all(digests.digest(manifest) == digest for _, digest, manifest in runs)
        assert {e for e, _, _ in runs} == set(BenchmarkRun.objects.values_list("external_id", flat=True))

    def test_restore_refuses_a_database_that_already_exists(self, tmp_path, fixture_runs):
        dumped = _backup("dump", "--database-url", _url(connection.settings_dict["NAME"]), "--out", tmp_path)
        archive = Path(dumped.stdout.strip().splitlines()[-1])

        again = _backup(
            "restore", archive, "--database-url", _url(connection.settings_dict["NAME"]), "--create"
        )

        assert again.returncode != 0
        assert "already exists" in again.stderr
        assert BenchmarkRun.objects.count() == 12

    def test_a_damaged_dump_is_refused_before_anything_is_written(
        self, tmp_path, fixture_runs, restored_database
    ):
        dumped = _backup("dump", "--database-url", _url(connection.settings_dict["NAME"]), "--out", tmp_path)
        archive = Path(dumped.stdout.strip().splitlines()[-1])
        data = bytearray(archive.read_bytes())
        data[len(data) // 2] ^= 0xFF
        archive.write_bytes(bytes(data))

        result = _backup("restore", archive, "--database-url", _url(restored_database), "--create")

        assert result.returncode != 0 and "sha256 does not match" in result.stderr
        with psycopg.connect(_url("postgres")) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [restored_database]
            ).fetchone()
        assert exists is None
