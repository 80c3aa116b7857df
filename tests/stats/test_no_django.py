"""registry/stats imports no Django: scripts/controlled_figures.py and the harness side use it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_statistics_package_loads_without_django():
    code = (
        "import sys; import registry.stats.intervals, registry.stats.verdict_model, registry.stats.shipped; "
        "print(any(name == 'django' or name.startswith('django.') for name in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
