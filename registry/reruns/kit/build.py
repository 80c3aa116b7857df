"""Building the kit: one source distribution made from the harness's own files, cached under
VAR_DIR/kit/ and served at /kit/.

Nothing of the harness is copied into the repository twice: the sdist is assembled, at build
time, from `registry/reruns/harness/*.py` (all but its Django-facing `__init__.py`), Liger's
harness mapping (`registry/sources/liger/harness.py`, shipped as `harness/kernels.py`), the
statistics it uses and this folder's `cli.py`, `result.py` and `backend.py`. Import prefixes are
renamed on the way in, as vendoring tools do (`registry.reruns.harness.` becomes
`kernelindex_kit.harness.`, the mapping's module `kernelindex_kit.harness.kernels`); a build that
leaves any import of registry, Django or the site in the kit fails, naming the file and line.

The version says what the kit carries: `1.0+liger085.protocolv1.<source hash>` is the kit's
release, the liger-kernel sdist its harness runs (0.8.5), the timing protocols' version
(kernelindex-cuda-v1 and kernelindex-cpu-v1) and the first 8 hex digits of the sha256 of its
files, so that any change to a harness file gives a new file name. The archive is deterministic
(sorted members, fixed times and owners): the same sources give the same bytes.
"""

import functools
import gzip
import hashlib
import io
import os
import re
import tarfile
import tempfile
from pathlib import Path

from django.conf import settings

from registry.reruns.harness import LIGER_KERNEL_VERSION, protocol_for

KIT_RELEASE = "1.0"
NAME = "kernelindex-kit"
PACKAGE = "kernelindex_kit"
HERE = Path(__file__).resolve().parent
HARNESS = HERE.parent / "harness"
# The statistics the harness shares with the web side (registry/stats/), shipped as harness/stats.py.
STATISTICS = HERE.parent.parent / "stats" / "medians.py"
# Which upstream script measures which kernel: Liger's part, in its folder, shipped beside the rest.
MAPPING = HERE.parent.parent / "sources" / "liger" / "harness.py"
HARNESS_MODULES = (
    "upstream",
    "cpu_triton",
    "distributed",
    "runner",
    "session",
    "spec",
    "timing",
)
KIT_FILES = ("result.py", "cli.py", "backend.py")
# What the kit needs besides torch (which the host brings, as for a worker: requirements-worker.txt).
# transformers is pinned as the workers pin it (requirements-worker.txt), since the reference
# implementations come from it and a later release may time differently.
DEPENDENCIES = ("numpy>=1.26", "scipy>=1.11", "transformers==5.17.0", "nvidia-ml-py>=12.535")
REWRITES = (
    ("from registry.reruns.harness.", "from kernelindex_kit.harness."),
    ("from registry.sources.liger.harness import", "from kernelindex_kit.harness.kernels import"),
)
FORBIDDEN = re.compile(
    r"^\s*(?:from|import)\s+(?:registry|django|rest_framework|kernelindex|attestations)\b", re.M
)
EPOCH = 1_767_225_600  # 2026-01-01: every member's time, so that a rebuild gives the same bytes


class KitBuildError(RuntimeError):
    pass


def kit_dir() -> Path:
    return Path(settings.VAR_DIR) / "kit"


def protocol_names() -> list[str]:
    return [
        protocol_for(device=device, metric="latency", timing=settings.CONTROLLED_TIMING)["name"]
        for device in ("cuda", "cpu")
    ]


def kit_version() -> str:
    return _assembled()[0]


def kit_filename(version: str | None = None) -> str:
    return f"{NAME}-{version or kit_version()}.tar.gz"


def kit_build(*, dest: Path | None = None) -> Path:
    """The kit's sdist for the current sources, built into `dest` (default VAR_DIR/kit/) unless
    it is already there; written to a temporary file and renamed, so a reader never sees half."""
    version, files = _assembled()
    dest = Path(dest or kit_dir())
    path = dest / kit_filename(version)
    if path.is_file():
        return path
    dest.mkdir(parents=True, exist_ok=True)
    data = _sdist_bytes(version, files)
    with tempfile.NamedTemporaryFile(dir=dest, delete=False, suffix=".part") as part:
        part.write(data)
    os.replace(part.name, path)
    return path


def _sources() -> list[Path]:
    return [
        *(HARNESS / f"{name}.py" for name in HARNESS_MODULES),
        MAPPING,
        STATISTICS,
        *(HERE / n for n in KIT_FILES),
    ]


def _assembled() -> tuple[str, dict[str, bytes]]:
    """(version, {path inside the package: bytes}) for the current sources: read again only when
    a source file changed (the run page names the kit on every render)."""
    return _assembled_from(tuple((path, *_stamp(path)) for path in _sources()))


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=4)
def _assembled_from(stamps: tuple) -> tuple[str, dict[str, bytes]]:
    package = {f"harness/{name}.py": _vendored(HARNESS / f"{name}.py") for name in HARNESS_MODULES}
    package["harness/kernels.py"] = _vendored(MAPPING)
    package["harness/stats.py"] = _vendored(STATISTICS)
    package["result.py"] = _vendored(HERE / "result.py")
    package["cli.py"] = _vendored(HERE / "cli.py")
    package["harness/__init__.py"] = b'"""The KernelIndex harness, as the site\'s workers run it."""\n'
    digest = hashlib.sha256()
    for name in sorted(package):
        digest.update(name.encode() + b"\0" + package[name] + b"\0")
    digest.update((HERE / "backend.py").read_bytes())
    protocol = {name.rsplit("-", 1)[-1] for name in protocol_names()}
    if len(protocol) != 1:
        raise KitBuildError(f"the timing protocols carry different versions: {protocol_names()}")
    version = f"{KIT_RELEASE}+liger{LIGER_KERNEL_VERSION.replace('.', '')}.protocol{protocol.pop()}.{digest.hexdigest()[:8]}"
    package["__init__.py"] = _package_init(version)
    return version, package


def _vendored(path: Path) -> bytes:
    text = path.read_text()
    for old, new in REWRITES:
        text = text.replace(old, new)
    found = FORBIDDEN.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        raise KitBuildError(f"{path}:{line} imports the site ({found.group().strip()}); the kit must not")
    return text.encode()


def _package_init(version: str) -> bytes:
    return (
        '"""KernelIndex reproduction kit: runs one KernelIndex run\'s workload under the same\n'
        'protocol as the site\'s workers and writes a result file. `kernelindex-repro --help`."""\n\n'
        f"VERSION = {version!r}\n"
        f"HARNESS = {f'liger-kernel {LIGER_KERNEL_VERSION} source distribution'!r}\n"
        f"PROTOCOLS = {tuple(protocol_names())!r}\n"
    ).encode()


def _pyproject(version: str) -> bytes:
    dependencies = ", ".join(f'"{d}"' for d in DEPENDENCIES)
    return (
        "# Built by KernelIndex (registry/reruns/kit/build.py). The build backend is the sdist's own\n"
        "# kit_backend.py (standard library only), so pip installs it with no package index.\n"
        "[build-system]\n"
        "requires = []\n"
        'build-backend = "kit_backend"\n'
        'backend-path = ["."]\n\n'
        "[project]\n"
        f'name = "{NAME}"\n'
        f'version = "{version}"\n'
        'description = "Reproduce a KernelIndex benchmark run on your own GPU and file the result"\n'
        'requires-python = ">=3.11"\n'
        f"dependencies = [{dependencies}]\n\n"
        "[project.scripts]\n"
        'kernelindex-repro = "kernelindex_kit.cli:main"\n'
    ).encode()


def _sdist_bytes(version: str, package: dict[str, bytes]) -> bytes:
    top = f"{NAME}-{version}"
    members = {
        "pyproject.toml": _pyproject(version),
        "kit_backend.py": (HERE / "backend.py").read_bytes(),
        "PKG-INFO": (
            f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Reproduce a KernelIndex benchmark run on your own GPU and file the result\n"
            "Requires-Python: >=3.11\n" + "".join(f"Requires-Dist: {d}\n" for d in DEPENDENCIES)
        ).encode(),
        **{f"{PACKAGE}/{name}": data for name, data in package.items()},
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(members[name]), EPOCH, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(members[name]))
    return gzip.compress(raw.getvalue(), mtime=EPOCH)
