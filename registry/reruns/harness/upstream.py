"""Where the upstream harness lives: the pinned liger-kernel source distribution, unpacked into a
cache folder outside the repository (KernelIndex never copies upstream code into itself).

The folder holds `liger-kernel-<version>/` with the sdist's `benchmark/scripts`, `test` and
`src` (its `liger_kernel` package and egg-info: the implementation the scripts import, at the
same version) plus its LICENSE.

Two ways in, both ending in the same sha256 check and the same unpacking (no build step):
- `harness_fetch()` downloads the sdist from the package index with pip (a connected machine);
- `harness_fetch(archive=PATH)`, or the environment variable KERNELINDEX_HARNESS_ARCHIVE, unpacks a
  local copy (a GPU host that reaches no index): PATH is the `.tar.gz` itself or a folder holding it,
  such as the wheelhouse that `scripts/wheelhouse.py` builds.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LIGER_KERNEL_VERSION = "0.8.5"
LIGER_REPOSITORY = "https://github.com/linkedin/Liger-Kernel"  # as the importer names it (catalog.py)
# sha256 of each pinned sdist, as PyPI publishes it (https://pypi.org/simple/liger-kernel/).
LIGER_KERNEL_SHA256 = {
    "0.8.5": "4e8f8f611a8ad735c37c989410d09820bb08881f131851a3967c34baa7889d66",
}
ARCHIVE_ENV = "KERNELINDEX_HARNESS_ARCHIVE"
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


def archive_names(version: str = LIGER_KERNEL_VERSION) -> tuple[str, str]:
    """The sdist's file name as PyPI serves it (normalised), and the older spelling."""
    return f"liger_kernel-{version}.tar.gz", f"liger-kernel-{version}.tar.gz"


def harness_fetch(
    *,
    version: str = LIGER_KERNEL_VERSION,
    force: bool = False,
    archive: str | Path | None = None,
    sha256: str | None = None,
) -> Path:
    """Unpack the harness parts of the pinned sdist into `sdist_root(version)`.

    With `archive` (or KERNELINDEX_HARNESS_ARCHIVE) the sdist is read from that file or folder and
    nothing touches the network; otherwise pip downloads it from the package index. Either way
    its sha256 must be `sha256` or, by default, the pinned LIGER_KERNEL_SHA256[version]."""
    archive = archive or os.environ.get(ARCHIVE_ENV) or None
    local = archive_find(archive, version) if archive else None
    if local is not None:
        archive_check(local, version=version, sha256=sha256, required=True)
    root = sdist_root(version)
    if root.exists() and not force:
        harness_ready(version)
        return root
    with tempfile.TemporaryDirectory() as tmp:
        if local is None:
            local = _download(version, Path(tmp))
            archive_check(local, version=version, sha256=sha256, required=False)
        staging = Path(tmp) / "unpacked"
        _unpack(local, staging)
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(staging), root)
    return harness_ready(version)


def archive_find(path: str | Path, version: str = LIGER_KERNEL_VERSION) -> Path:
    """The sdist at `path`: the file itself, or the one in the folder `path`."""
    path = Path(path).expanduser()
    if path.is_dir():
        for name in archive_names(version):
            if (path / name).is_file():
                return path / name
        raise HarnessMissing(
            f"no liger-kernel {version} source archive ({' or '.join(archive_names(version))}) in {path}"
        )
    if not path.is_file():
        raise HarnessMissing(f"the liger-kernel source archive {path} does not exist")
    return path


def archive_check(
    path: Path, *, version: str = LIGER_KERNEL_VERSION, sha256: str | None = None, required: bool = True
) -> str:
    """The archive's sha256, or HarnessMissing when it is not the expected one. With no digest
    given or pinned for `version`, a local archive is refused (`required`); a download from the
    index (whose hash pip has checked against the index's) is let through."""
    expected = (sha256 or LIGER_KERNEL_SHA256.get(version) or "").lower().removeprefix("sha256:")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if not expected:
        if required:
            raise HarnessMissing(
                f"no sha256 is pinned for liger-kernel {version}; pass the sdist's sha256 "
                f"(as PyPI publishes it) to check {path} against"
            )
        return digest
    if digest != expected:
        raise HarnessMissing(
            f"{path} is not the liger-kernel {version} source distribution: its sha256 is {digest}, "
            f"expected {expected}. Refusing to unpack it; copy the archive again "
            f"(scripts/wheelhouse.py checks it when it builds the wheelhouse)."
        )
    return digest


def _download(version: str, dest: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        + ["--dest", str(dest), f"liger-kernel=={version}"],
        check=True,
    )
    archives = [dest / name for name in archive_names(version) if (dest / name).is_file()]
    if len(archives) != 1:
        raise HarnessMissing(f"pip did not download one liger-kernel sdist: {archives}")
    return archives[0]


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
