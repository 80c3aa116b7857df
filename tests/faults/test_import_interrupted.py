"""An import killed halfway leaves the registry exactly as it was; the next import completes."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from bench import generate
from registry.models import BenchmarkRun, SourceImport
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import
from tests.processes import ROOT, child_env
from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db(transaction=True)

# The bundled rows and synthetic ones (distinct from them): long enough an import that one of
# the delays below lands inside it however fast the importer gets.
SYNTHETIC_ROWS = 3000
# From a kill during start-up to one after the import, each delay half as long again.
DELAYS = (0.3, 0.45, 0.7, 1.0, 1.5, 2.2, 3.3, 5.0, 7.5)
# The child says when the import has begun, so a kill during Django's start-up is not taken for
# a kill mid-import.
CHILD = """
import sys
import django
django.setup()
from registry.sources.liger.services import liger_import
print("started", flush=True)
summary = liger_import(path=sys.argv[1])
print("Imported", summary, flush=True)
"""


def state():
    return (
        BenchmarkRun.objects.count(),
        BenchmarkRun.objects.filter(withdrawn=True).count(),
        SourceImport.objects.count(),
    )


def data_file(tmp_path) -> tuple[str, int]:
    with BUNDLED_LIGER_CSV.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle)) + list(generate.synthetic_rows(SYNTHETIC_ROWS))
    return write_csv(tmp_path / "data.csv", rows), len(rows)


def child_sessions_wait(application_name: str, timeout: float = 30) -> None:
    """A PostgreSQL backend outlives its killed client: a COMMIT already sent still lands, after
    the kill. Wait until the child's session (found by the application name it connected with;
    other tests may leave sessions of their own) is gone, so the registry read next is final."""
    if connection.vendor != "postgresql":
        return  # SQLite commits in the child's own process: nothing outlives it
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [application_name]
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)
    raise AssertionError(f"the killed import's database session ({application_name}) did not end")


def import_killed_after(path: str, delay: float) -> str:
    """Start an import in a child process, SIGKILL it after `delay` seconds: "early" (before the
    import began), "mid-import" (killed inside it) or "finished" (it said so)."""
    application_name = f"killed-import-{os.getpid()}-{delay}"
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, path],
        cwd=ROOT,
        env=child_env(PGAPPNAME=application_name),  # libpq's default application_name
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    output = process.communicate()[0].decode()
    child_sessions_wait(application_name)
    if "Imported" in output:
        return "finished"
    assert process.returncode == -signal.SIGKILL, output
    return "mid-import" if "started" in output else "early"


def test_killed_import_writes_nothing_and_the_next_one_completes(tmp_path):
    path, total = data_file(tmp_path)
    # A registry that already holds part of the data, so the killed import has work of each kind.
    liger_import(path=write_csv(tmp_path / "part.csv", bundled_rows("geglu")))
    before = state()
    completed = (total, 0, before[2] + 1)
    outcomes = []
    for delay in DELAYS:
        outcomes.append(import_killed_after(path, delay))
        if outcomes[-1] == "finished" or state() != before:
            # It committed (perhaps killed between its commit and its last line): all of it is
            # there, nothing of it is missing; and there is nothing left to interrupt.
            assert state() == completed, f"killed after {delay}s ({outcomes[-1]}), the registry changed"
            outcomes[-1] = "committed"
            break
    assert "mid-import" in outcomes, outcomes
    summary = liger_import(path=path)
    if outcomes[-1] == "committed":
        # The child's import committed: this one finds every row already there.
        assert (summary.created, summary.unchanged, summary.withdrawn) == (0, total, 0)
        assert state() == (total, 0, before[2] + 2)
    else:
        assert (summary.created, summary.unchanged, summary.withdrawn) == (total - before[0], before[0], 0)
        assert state() == (total, 0, before[2] + 1)
