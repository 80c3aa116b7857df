"""An import killed halfway leaves the registry exactly as it was; the next import completes."""

import signal
import subprocess
import time

import pytest

from registry.models import BenchmarkRun, SourceImport
from registry.services import BUNDLED_LIGER_CSV, liger_import
from tests.processes import child_env, manage
from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db(transaction=True)


def state():
    return (
        BenchmarkRun.objects.count(),
        BenchmarkRun.objects.filter(withdrawn=True).count(),
        SourceImport.objects.count(),
    )


def test_killed_import_writes_nothing_and_the_next_one_completes(tmp_path):
    # A registry that already holds part of the data, so the killed import has work of each kind.
    liger_import(path=write_csv(tmp_path / "part.csv", bundled_rows("geglu")))
    before = state()
    killed_mid_import = 0
    for delay in (1.0, 2.0, 3.0, 4.0, 5.0):
        process = subprocess.Popen(
            manage("import_liger", str(BUNDLED_LIGER_CSV)),
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        output = process.communicate()[0].decode()
        if process.returncode == -signal.SIGKILL and "Imported" not in output:
            killed_mid_import += 1
            assert state() == before, f"killed after {delay}s, the registry changed"
        else:
            break  # it finished before the kill: nothing left to interrupt at longer delays
    assert killed_mid_import >= 1
    summary = liger_import(path=BUNDLED_LIGER_CSV)
    assert summary.created == 2448 - before[0]
    assert summary.unchanged == before[0]
    assert BenchmarkRun.objects.count() == 2448
