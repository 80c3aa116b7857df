"""The daily sync is in Celery beat's schedule when LIGER_SYNC_DAILY is set, and only then.

Settings are read once per process, so each case starts a fresh interpreter with its environment.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, django
django.setup()
from kernelindex.celery import app
app.loader.import_default_modules()
entries = {}
for name, entry in app.conf.beat_schedule.items():
    schedule = entry["schedule"]
    if not hasattr(schedule, "hour"):  # an interval, e.g. jobs-reconcile every 60 s
        entries[name] = {"task": entry["task"]}
        continue
    entries[name] = {
        "task": entry["task"],
        "registered": entry["task"] in app.tasks,
        "hours": sorted(schedule.hour),
        "minutes": sorted(schedule.minute),
        "queue": entry.get("options", {}).get("queue"),
    }
print(json.dumps(entries))
"""


def _beat_schedule(**environment) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LIGER_SYNC_DAILY", "LIGER_SYNC_HOUR")}
    env.update(DJANGO_SETTINGS_MODULE="tests.settings", **environment)
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


class TestDailySyncSchedule:
    def test_enabled_it_runs_the_registered_sync_task_daily_on_the_default_queue(self):
        schedule = _beat_schedule(LIGER_SYNC_DAILY="1", LIGER_SYNC_HOUR="22")

        assert schedule["liger-sync-daily"] == {
            "task": "registry.sync_liger",
            "registered": True,
            "hours": [22],
            "minutes": [17],
            "queue": "default",
        }

    def test_off_by_default(self):
        assert "liger-sync-daily" not in _beat_schedule()
