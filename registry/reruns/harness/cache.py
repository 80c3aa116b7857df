"""Where the upstream harness lives: the pinned liger-kernel source distribution, unpacked into a
cache folder outside the repository (KernelIndex never copies upstream code into itself).

The folder holds `liger-kernel-<version>/` with the sdist's `benchmark/scripts`, `test` and
`src` (its `liger_kernel` package and egg-info: the implementation the scripts import, at the
same version) plus its LICENSE.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LIGER_KERNEL_VERSION = "0.8.5"
MEMBERS = ("benchmark/scripts", "test", "src", "LICENSE", "PKG-INFO")
SKIPPED = ("test/resources",)  # 27 MB of convergence-test data that no benchmark script reads


class HarnessMissing(RuntimeError):
    pass


def harness_dir() -> Path:
    """KERNELINDEX_HARNESS_DIR, or ~/.cache/kernelindex/harness."""
    configured = os.environ.get("KERNELINDEX_HARNESS_DIR", "")
    base = Path(configured) if configured else Path.home() / ".cache" / "kernelindex" / "harness"
    return base.expanduser().resolve()


def sdist_root(version: str = LIGER_KERNEL_VERSION) -> Path:
    return harness_dir() / f"liger-kernel-{version}"


def harness_ready(version: str = LIGER_KERNEL_VERSION) -> Path:
    """The unpacked sdist root, or `HarnessMissing` saying how to fetch it."""
    root = sdist_root(version)
    if not (root / "benchmark" / "scripts" / "utils.py").is_file():
        raise HarnessMissing(
            f"the liger-kernel {version} harness is not in {root}; run `python manage.py fetch_harness`"
        )
    return root


def harness_fetch(*, version: str = LIGER_KERNEL_VERSION, force: bool = False) -> Path:
    """Download the pinned sdist from PyPI with pip and unpack the harness parts of it."""
    root = sdist_root(version)
    if root.exists() and not force:
        harness_ready(version)
        return root
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
            + ["--dest", tmp, f"liger-kernel=={version}"],
            check=True,
        )
        archives = list(Path(tmp).glob("liger_kernel-*.tar.gz")) + list(
            Path(tmp).glob("liger-kernel-*.tar.gz")
        )
        if len(archives) != 1:
            raise HarnessMissing(f"pip did not download one liger-kernel sdist: {archives}")
        staging = Path(tmp) / "unpacked"
        _unpack(archives[0], staging)
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(staging), root)
    return harness_ready(version)


def _unpack(archive: Path, dest: Path) -> None:
    """Extract only MEMBERS, with the archive's top folder stripped; the tar filter refuses links
    and paths that leave the destination."""
    with tarfile.open(archive) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        chosen = []
        for member in tar.getmembers():
            relative = member.name[len(top) + 1 :]
            if _within(relative, MEMBERS) and not _within(relative, SKIPPED):
                member.name = relative
                chosen.append(member)
        tar.extractall(dest, members=chosen, filter="data")


def _within(relative: str, folders) -> bool:
    return any(relative == f or relative.startswith(f + "/") for f in folders)
