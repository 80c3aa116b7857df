"""A KernelBench-shaped folder built from a few versions, and a git clone with the same history."""

import hashlib
import json
import subprocess

import pytest

MATMUL = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)

N = 2048 * 2

def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [A, B]

def get_init_inputs():
    return []
"""
RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
"""


def row(mean, hardware="NVIDIA L40S", std=0.01, trials=100):
    return {
        "mean": mean,
        "std": std,
        "min": round(mean * 0.95, 4),
        "max": round(mean * 1.1, 4),
        "num_trials": trials,
        "hardware": hardware,
        "device": "cuda:0",
    }


def commit_of(n: int) -> str:
    return hashlib.sha1(f"commit {n}".encode()).hexdigest()


def blob_of(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_folder(root, versions):
    """`versions`: [{"subject", "date", "files": {path: document or bytes}, "problems": {(level, file): text}}],
    oldest first; commits are made up (sha1 of their number)."""
    (root / "timing").mkdir(parents=True)
    (root / "problems").mkdir()
    timing = ["commit\tdate\tsubject\tpath\tblob\trows"]
    problems = ["commit\tlevel\tfile\tblob"]
    for n, version in enumerate(versions, start=1):
        commit = commit_of(n)
        for path, document in version["files"].items():
            data = document if isinstance(document, bytes) else json.dumps(document).encode()
            blob = blob_of(data)
            (root / "timing" / f"{blob}.json").write_bytes(data)
            timing.append(f"{commit}\t{version['date']}\t{version['subject']}\t{path}\t{blob}\t1")
        for (level, file), text in version.get("problems", {}).items():
            blob = blob_of(text.encode())
            (root / "problems" / f"{blob}.py").write_text(text)
            problems.append(f"{commit}\t{level}\t{file}\t{blob}")
    (root / "timing" / "INDEX.tsv").write_text("\n".join(timing) + "\n")
    (root / "problems" / "INDEX.tsv").write_text("\n".join(problems) + "\n")
    return root


PROBLEMS = {("level1", "1_Square_matrix_multiplication_.py"): MATMUL, ("level1", "19_ReLU.py"): RELU}


def two_versions():
    """v1: eager and compile on an L40S, and one file mixing A100 40 GB and 80 GB rows.
    v2 (pull request #7): the matmul's eager mean changes, ReLU's compile row is gone, and the
    A100 file moves under old/ unchanged."""
    mixed = {
        "level1": {
            "19_ReLU.py": row(0.02, "NVIDIA A100-SXM4-40GB"),
            "1_Square_matrix_multiplication_.py": row(1.5, "NVIDIA A100-SXM4-80GB"),
        }
    }
    v1 = {
        "subject": "add baseline times",
        "date": "2024-12-01T13:56:42-08:00",
        "files": {
            "results/timing/L40S/baseline_time_torch.json": {
                "level1": {"1_Square_matrix_multiplication_.py": row(1.0), "19_ReLU.py": row(0.03)}
            },
            "results/timing/L40S/baseline_time_torch_compile_inductor_default.json": {
                "level1": {"1_Square_matrix_multiplication_.py": row(0.9), "19_ReLU.py": row(0.02)}
            },
            "results/timing/baseline_time_modal.json": mixed,
        },
        "problems": PROBLEMS,
    }
    v2 = {
        "subject": "Refresh the L40S figures (#7)",
        "date": "2025-01-19T19:25:46-08:00",
        "files": {
            "results/timing/L40S/baseline_time_torch.json": {
                "level1": {"1_Square_matrix_multiplication_.py": row(1.1), "19_ReLU.py": row(0.03)}
            },
            "results/timing/L40S/baseline_time_torch_compile_inductor_default.json": {
                "level1": {"1_Square_matrix_multiplication_.py": row(0.9), "19_ReLU.py": None}
            },
            "results/timing/old/baseline_time_modal.json": mixed,
        },
        "problems": PROBLEMS,
    }
    return [v1, v2]


@pytest.fixture
def kb_folder(tmp_path):
    return write_folder(tmp_path / "kernelbench", two_versions())


def git_clone_of(root, versions):
    """A real git repository with one commit per version (the files under their upstream paths)."""
    root.mkdir()

    def git(*args, env=None):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "test@example.org")
    git("config", "user.name", "Test")
    for version in versions:
        for path in root.glob("results/timing/**/*.json"):
            path.unlink()
        for path, document in version["files"].items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(document if isinstance(document, bytes) else json.dumps(document).encode())
        for (level, file), text in version.get("problems", {}).items():
            target = root / "KernelBench" / level / file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git("add", "-A")
        env = {
            "GIT_AUTHOR_DATE": version["date"],
            "GIT_COMMITTER_DATE": version["date"],
            "PATH": "/usr/bin:/bin",
        }
        env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)})
        subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "-c",
                "user.email=t@example.org",
                "-c",
                "user.name=T",
                "commit",
                "-q",
                "-m",
                version["subject"],
            ],
            check=True,
            capture_output=True,
            env=env,
        )
    return root


@pytest.fixture
def site_runs(tmp_path):
    """A few Liger runs beside the KernelBench ones, through Liger's real importer."""
    import csv

    from registry.sources.liger.importer import COLUMNS
    from registry.sources.liger.services import liger_import
    from tests.site.conftest import liger_rows

    rows = liger_rows()
    path = tmp_path / "liger.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    liger_import(path=path)
    return len(rows)
