"""Find a liger-kernel source distribution on PyPI, download it, and read its benchmark data.

Only the source distribution carries `benchmark/data/`; the wheel does not. The data files are
read from the archive in memory (never extracted), so a hostile archive cannot write anywhere.
The base URL is `settings.PYPI_URL` (PyPI, or a mirror of it), so tests serve PyPI's JSON API
from 127.0.0.1.
"""

import hashlib
import json
import re
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urljoin

from django.conf import settings

PROJECT = "liger-kernel"
DATA_FILE = re.compile(r"^[^/]+/benchmark/data/(?P<name>all_benchmark_data(?:_[a-z0-9]+)?\.csv)$")
MAX_ARCHIVE_BYTES = 200 * 1024 * 1024
MAX_DATA_FILE_BYTES = 50 * 1024 * 1024
VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]{0,99}$")


class PyPIError(Exception):
    """PyPI could not be asked, or did not have what we need; nothing was imported."""


@dataclass(frozen=True)
class Release:
    version: str
    url: str
    filename: str
    sha256: str
    uploaded_at: datetime | None = None


@dataclass(frozen=True)
class DataFile:
    name: str
    data: bytes


def release_find(*, version: str = "") -> Release:
    """The sdist of `version`, or of the newest release the index lists when version is blank.

    Read from the project's JSON document, never the per-version one: mirrors of PyPI
    (settings.PYPI_URL names the index) serve the project document but answer 404 for
    /pypi/<project>/<version>/json, and give file URLs relative to the document
    (../../packages/...), which are resolved against it."""
    if version and not VERSION.match(version):
        raise PyPIError(f"{version!r} is not a version number")
    url = settings.PYPI_URL.rstrip("/") + f"/pypi/{PROJECT}/json"
    document = _json_get(url)
    try:
        found = version or document["info"]["version"]
        releases = document.get("releases") or {}
        files = releases[found] if found in releases else document["urls"]
        if found != document["info"]["version"] and found not in releases:
            raise PyPIError(f"{PROJECT} {found} is not a release the index lists")
    except (KeyError, TypeError, AttributeError):
        raise PyPIError(f"{url}: not a PyPI JSON API answer") from None
    sdists = [f for f in files if f.get("packagetype") == "sdist" and not f.get("yanked")]
    if not sdists:
        raise PyPIError(f"{PROJECT} {found} has no source distribution on the index")
    sdist = sdists[0]
    try:
        return Release(
            version=found,
            url=urljoin(url, sdist["url"]),
            filename=sdist["filename"],
            sha256=sdist["digests"]["sha256"],
            uploaded_at=_uploaded_at(sdist),
        )
    except (KeyError, TypeError):
        raise PyPIError(f"{PROJECT} {found}: the sdist entry lacks url, filename or sha256") from None


def _uploaded_at(entry: dict) -> datetime | None:
    """When the release was published: it dates the import against the repository's history."""
    value = entry.get("upload_time_iso_8601") or ""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def sdist_download(*, release: Release, directory: Path) -> Path:
    """Download the archive into `directory` and check it against PyPI's sha256."""
    target = Path(directory) / Path(release.filename).name
    digest = hashlib.sha256()
    size = 0
    try:
        with _open(release.url) as response, target.open("wb") as out:
            while chunk := response.read(1024 * 1024):
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise PyPIError(f"{release.filename} is larger than {MAX_ARCHIVE_BYTES} bytes")
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:  # URLError, timeouts and a full disk alike
        raise PyPIError(f"{release.url}: download failed ({exc})") from None
    if digest.hexdigest() != release.sha256:
        raise PyPIError(
            f"{release.filename}: sha256 {digest.hexdigest()} does not match PyPI's {release.sha256}"
        )
    return target


def data_files(archive: Path) -> list[DataFile]:
    """Every benchmark data CSV in the archive, all_benchmark_data.csv first."""
    found = []
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                match = DATA_FILE.match(member.name)
                if not match or not member.isfile():
                    continue
                if member.size > MAX_DATA_FILE_BYTES:
                    raise PyPIError(f"{member.name} is larger than {MAX_DATA_FILE_BYTES} bytes")
                found.append(DataFile(name=match["name"], data=tar.extractfile(member).read()))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PyPIError(f"{archive.name}: not a readable .tar.gz ({exc})") from None
    if not any(f.name == "all_benchmark_data.csv" for f in found):
        raise PyPIError(f"{archive.name}: no benchmark/data/all_benchmark_data.csv inside")
    names = [f.name for f in found]
    if len(set(names)) != len(names):
        raise PyPIError(f"{archive.name}: a benchmark data file appears twice")
    return sorted(found, key=lambda f: (f.name != "all_benchmark_data.csv", f.name))


def _json_get(url: str) -> dict:
    try:
        with _open(url) as response:
            return json.loads(response.read(10 * 1024 * 1024))
    except urllib.error.HTTPError as exc:
        raise PyPIError(f"{url}: HTTP {exc.code}") from None
    except OSError as exc:
        raise PyPIError(f"{url}: {exc}") from None
    except ValueError:
        raise PyPIError(f"{url}: the answer is not JSON") from None


def _open(url: str):
    if not url.startswith(("https://", "http://")):
        raise PyPIError(f"{url}: only http(s) URLs are fetched")
    request = urllib.request.Request(url, headers={"User-Agent": "KernelIndex sync (+liger-kernel data)"})
    return urllib.request.urlopen(request, timeout=settings.PYPI_TIMEOUT)
