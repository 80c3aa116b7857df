"""Which result files count (issue 36, finding 6): a data-bearing file counts once per run, whoever
files it; a file for a run the harness cannot run, or for a withdrawn or superseded run, is refused
with a message naming the current run where there is one."""

import importlib

import pytest
from django.apps import apps as django_apps
from django.db import IntegrityError, transaction

from attestations import services
from attestations.models import Attestation, AuditEntry
from registry.models import BenchmarkRun
from tests.attestations.test_data_reproductions import (  # noqa: F401
    cpu_runs,
    refusal,
    result_file,
    run,
    token,
    upload,
)
from tests.conftest import make_user
from tests.faults.support import needs_postgresql, small_cpu_rows
from tests.reruns.conftest import csv_import, row

pytestmark = pytest.mark.django_db


def token_of(user) -> str:
    return services.api_token_regenerate(user=user).key


class TestAFileCountsOncePerRun:
    def test_another_user_filing_the_same_file_is_refused_naming_the_first_filing(
        self,
        client,
        run,  # noqa: F811
        token,  # noqa: F811
        other_contributor,
    ):
        document = result_file(run)
        first = upload(client, run, document, token)
        assert first.status_code == 201

        reason = refusal(upload(client, run, document, token_of(other_contributor)))

        assert f"reproduction #{first.json()['id']}" in reason and "counts once" in reason
        assert Attestation.objects.count() == 1

    def test_the_database_holds_it_too(self, run, contributor, other_contributor):  # noqa: F811
        fields = {"run": run, "kind": "reproduction", "origin": "file", "content_digest": "ab" * 32}
        figures = {"median": 1.0, "p20": 1.0, "p80": 1.0}
        Attestation.objects.create(author=contributor, **fields, **figures)
        with pytest.raises(IntegrityError), transaction.atomic():
            Attestation.objects.create(author=other_contributor, **fields, **figures)

    def test_a_rejected_filing_does_not_count_so_the_file_may_be_filed_again(
        self,
        client,
        run,  # noqa: F811
        token,  # noqa: F811
        other_contributor,
        moderator,
    ):
        document = result_file(run)
        upload(client, run, document, token)
        services.attestation_reject(
            attestation=Attestation.objects.get(), moderator=moderator, reason="Wrong card."
        )

        assert upload(client, run, document, token_of(other_contributor)).status_code == 201

    def test_the_migration_rejects_later_duplicates_already_stored(self, run, contributor, other_contributor):  # noqa: F811
        needs_postgresql()  # SQLite's schema editor cannot drop a constraint inside the test's transaction
        migration = importlib.import_module("attestations.migrations.0006_one_filing_per_result_file")
        with migration_constraint_off():
            fields = {"run": run, "kind": "reproduction", "origin": "file", "content_digest": "cd" * 32}
            figures = {"median": 1.0, "p20": 1.0, "p80": 1.0}
            first = Attestation.objects.create(author=contributor, **fields, **figures)
            later = Attestation.objects.create(author=other_contributor, **fields, **figures)

            migration.later_filings_reject(django_apps, None)

        first.refresh_from_db()
        later.refresh_from_db()
        assert (first.state, later.state) == ("pending", "rejected")
        assert f"reproduction #{first.pk}" in later.rejection_reason
        assert AuditEntry.objects.for_object(later).get().action == "rejected"


class migration_constraint_off:
    """Rows as they stood before migration 0006: the constraint dropped for the block's length."""

    def __enter__(self):
        from django.db import connection

        self.constraint = next(
            c for c in Attestation._meta.constraints if c.name == "one_filing_per_result_file"
        )
        with connection.schema_editor() as editor:
            editor.remove_constraint(Attestation, self.constraint)

    def __exit__(self, *exc):
        from django.db import connection

        with connection.cursor() as cursor:  # the rows' deferred foreign-key checks, run now
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        with connection.schema_editor() as editor:
            editor.add_constraint(Attestation, self.constraint)


@pytest.fixture
def three_runs(tmp_path, db):
    """A CPU run, its row measured again later (supersedes it), and a CPU memory run."""
    rows = small_cpu_rows(2) + [row("huggingface", "forward", metric="memory", gpu="cpu", x=16)]
    csv_import(tmp_path / "a.csv", rows)
    return {
        "first": BenchmarkRun.objects.get(environment__slug="cpu", metric="latency", workload__x_value=16),
        "other": BenchmarkRun.objects.get(environment__slug="cpu", metric="latency", workload__x_value=24),
        "memory": BenchmarkRun.objects.get(environment__slug="cpu", metric="memory"),
    }


class TestFilesForRunsThatCannotBeJudgedAreRefused:
    def test_a_run_the_harness_cannot_run(self, client, three_runs, token):  # noqa: F811
        memory = three_runs["memory"]

        reason = refusal(upload(client, memory, result_file(memory, unit="MB"), token))

        assert reason.startswith("run: the harness cannot run") and "CPU" in reason
        assert not Attestation.objects.exists()

    def test_a_superseded_run_names_the_current_one(self, client, three_runs, token, tmp_path):  # noqa: F811
        first = three_runs["first"]
        document = result_file(first)
        newer = [r[:] for r in small_cpu_rows(2)]
        newer[0][-2] = "2025-02-01 00:00:00"  # measured again: a new row of the same key
        csv_import(tmp_path / "b.csv", newer)
        first.refresh_from_db()
        assert first.superseded_by_id is not None

        reason = refusal(upload(client, first, document, token))

        assert reason.startswith(f"run: run {first.pk} is superseded by run {first.superseded_by_id}")
        assert not Attestation.objects.exists()

    def test_a_withdrawn_run_says_so(self, client, three_runs, token, tmp_path):  # noqa: F811
        other = three_runs["other"]
        document = result_file(other)
        csv_import(
            tmp_path / "b.csv",
            small_cpu_rows(1) + [row("huggingface", "forward", metric="memory", gpu="cpu")],
        )
        other.refresh_from_db()
        assert other.withdrawn

        reason = refusal(upload(client, other, document, token))

        assert reason.startswith(f"run: run {other.pk} is withdrawn") and "no current run" in reason
        assert not Attestation.objects.exists()

    def test_the_form_refuses_them_too(self, three_runs, tmp_path):
        from django.core.files.uploadedfile import SimpleUploadedFile
        from django.test import Client
        from django.urls import reverse

        memory = three_runs["memory"]
        client = Client()
        client.force_login(make_user("lin"))
        import json

        response = client.post(
            reverse("attestations:attestation-create", args=[memory.pk]),
            {
                "kind": "reproduction",
                "file": SimpleUploadedFile("r.json", json.dumps(result_file(memory, unit="MB")).encode()),
            },
        )

        assert response.status_code == 200 and b"the harness cannot run" in response.content
        assert not Attestation.objects.exists()
