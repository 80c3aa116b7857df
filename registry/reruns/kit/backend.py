"""The kit's build backend (PEP 517), standard library only: it travels inside the sdist as
`kit_backend.py` (`backend-path = ["."]`), so that `pip install kernelindex-kit-<version>.tar.gz`
needs no build tool and no package index. It turns the sdist's `kernelindex_kit/` and
`pyproject.toml` into a pure-Python wheel: the package, METADATA, WHEEL, entry_points.txt and
RECORD. Nothing is compiled."""

import base64
import hashlib
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = "kernelindex_kit"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name, version = project["name"].replace("-", "_"), project["version"]
    dist_info = f"{name}-{version}.dist-info"
    files = {
        path.relative_to(ROOT).as_posix(): path.read_bytes()
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
    }
    files[f"{dist_info}/METADATA"] = _metadata(project).encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: kit_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    scripts = "".join(f"{script} = {target}\n" for script, target in project.get("scripts", {}).items())
    files[f"{dist_info}/entry_points.txt"] = f"[console_scripts]\n{scripts}".encode()
    record = [f"{path},sha256={_urlsafe_sha256(data)},{len(data)}" for path, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            wheel.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return filename


def build_sdist(sdist_directory, config_settings=None):
    """The sdist again, as it was served (the same files under the same top folder)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    top = f"{project['name']}-{project['version']}"
    filename = f"{top}.tar.gz"
    with tarfile.open(Path(sdist_directory) / filename, "w:gz") as tar:
        for path in sorted(p for p in ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            tar.add(path, arcname=f"{top}/{path.relative_to(ROOT).as_posix()}")
    return filename


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
        f"Requires-Python: {project.get('requires-python', '>=3.11')}",
        *(f"Requires-Dist: {dependency}" for dependency in project.get("dependencies", [])),
    ]
    return "\n".join(lines) + "\n"


def _urlsafe_sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
