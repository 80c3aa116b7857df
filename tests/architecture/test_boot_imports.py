"""A Django process starts without scipy: every web and Celery worker and every `manage.py`
command boots the project, and scipy.stats alone cost about as much CPU as the rest of that boot
(measured on 2026-12-07 on a 2-core x86_64 machine: `manage.py check` 1.9 s of user CPU with it
imported at the top of the statistics modules, 0.9 s without). The statistics import it where a
figure is computed (registry/stats/medians.py says so). A fresh interpreter boots the project as
a web worker does (settings, apps, the URL list) and as a Celery worker does (its tasks), and
fails if scipy was loaded."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BOOT = """
import json, sys
import django
django.setup()
from django.urls import resolve
resolve("/")
from kernelindex.celery import app
app.loader.import_default_modules()
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {probed!r})))
"""


def modules_loaded_at_boot(probed: set[str]) -> list[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kernelindex.settings", "DEBUG": "1"}
    out = subprocess.run(
        [sys.executable, "-c", BOOT.format(probed=probed)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_a_django_process_boots_without_scipy():
    assert modules_loaded_at_boot({"scipy"}) == []


def test_the_probe_sees_what_the_boot_loads():
    """The same probe finds a package the boot does load, so an empty list above is a finding."""
    assert "django.urls" in modules_loaded_at_boot({"django"})
