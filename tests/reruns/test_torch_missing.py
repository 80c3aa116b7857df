"""The commands that need torch say so in one line and exit non-zero on a host without it, before
they send a job or start a measurement (torch is hidden from a fresh interpreter here)."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from registry.reruns.kit.build import DEPENDENCIES, kit_build

ROOT = Path(__file__).resolve().parents[2]
# A finder ahead of the others that finds no torch, as on a host without it (a None entry in
# sys.modules would confuse scipy, which looks there for torch arrays).
HIDE_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
"""


def without_torch(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        DEBUG="1",
        KERNELINDEX_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="kernelindex.settings",
    )
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-c", HIDE_TORCH + code + "\n"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def manage(*argv: str) -> str:
    return f"import runpy; sys.argv = ['manage.py', *{list(argv)!r}]; runpy.run_path('manage.py', run_name='__main__')"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("controlled_sweep", manage("controlled_sweep", "--gpu", "nvidia-h200", "--deadline", "5")),
        ("measure_ceilings", manage("measure_ceilings", "--gpu", "nvidia-h200")),
        (
            "kernelindex-repro",
            "from kernelindex_kit.cli import main; sys.exit(main(['http://127.0.0.1:8259/runs/1/']))",
        ),
    ],
)
def test_a_command_that_needs_torch_says_so_in_one_line(tmp_path, name, code):
    if name == "kernelindex-repro":  # the kit as pip unpacks it, not the site's sources
        with tarfile.open(kit_build(dest=tmp_path / "kit")) as sdist:
            sdist.extractall(tmp_path / "kit", filter="data")
        (root,) = [p for p in (tmp_path / "kit").iterdir() if p.is_dir()]
        code = f"sys.path.insert(0, {str(root)!r}); " + code
    done = without_torch(code, tmp_path)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"{name} needs torch" in lines[0]
    assert "Traceback" not in done.stderr


def test_the_sweep_sends_no_job_without_torch(tmp_path):
    done = without_torch(
        manage("controlled_sweep", "--gpu", "nvidia-h200", "--out", str(tmp_path / "out")), tmp_path
    )
    assert "No job was sent." in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_kit_pins_transformers_as_the_workers_do():
    pinned = [
        line.strip()
        for line in (ROOT / "requirements-worker.txt").read_text().splitlines()
        if line.startswith("transformers==")
    ]
    assert pinned and pinned[0] in DEPENDENCIES
