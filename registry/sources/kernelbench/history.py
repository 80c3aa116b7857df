"""The versions of KernelBench's published reference timings, oldest first, read and checked.

Three layouts give the same versions: a git clone of KernelBench (every first-parent commit that
touched `results/timing`), a folder laid out like the shipped data (`timing/INDEX.tsv`,
`problems/INDEX.tsv` and the files by git blob id; data/SOURCE.md), or that folder as one
`.tar.xz` (what the repository ships). Each version is the whole `results/timing` folder as it
stood at its commit. Parsing writes nothing: a malformed file raises `KernelBenchFormatError`
naming the file, the commit and the place of the first problem. No Django here.
"""

import csv
import io
import json
import math
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

TIMING_DIR = "results/timing/"
PROBLEM_DIR = re.compile(r"^KernelBench/(?P<level>level\d+)/(?P<file>[^/]+\.py)$")
LEVEL = re.compile(r"^level\d+$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
PULL_REQUEST = (re.compile(r"\(#(\d+)\)\s*$"), re.compile(r"^Merge pull request #(\d+)\b"))
FIGURES = ("mean", "std", "min", "max")
GIT_TIMEOUT = 120


class KernelBenchFormatError(ValueError):
    """`path`: the timing file (or index); `commit`: the version; `place`: where in the file."""

    def __init__(self, message: str, *, path: str = "", commit: str = "", place: str = ""):
        self.path, self.commit, self.place = path, commit, place
        where = ", ".join(part for part in (path, f"at commit {commit}" if commit else "", place) if part)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class Row:
    """One published timing: its upstream key is (file_key, level, problem, hardware)."""

    path: str  # the timing file's path in the repository
    file_key: str  # relative to results/timing/, a leading old/ removed
    level: str
    problem: str
    hardware: str
    device: str
    mean: float
    std: float
    min: float
    max: float
    num_trials: int
    problem_blob: str | None  # the problem file at this commit; None when the repository lacks it

    @property
    def key(self) -> tuple:
        return (self.file_key, self.level, self.problem, self.hardware)

    @property
    def value(self) -> tuple:
        return (self.mean, self.std, self.min, self.max, self.num_trials, self.problem_blob)


@dataclass
class Version:
    commit: str
    date: datetime
    subject: str
    timing: list[tuple[str, str]]  # (path, blob) of every timing file at this commit
    problems: dict[tuple[str, str], str]  # (level, file) -> blob
    store: "_Store" = field(repr=False)

    @property
    def pull_request(self) -> int | None:
        for pattern in PULL_REQUEST:
            match = pattern.search(self.subject)
            if match:
                return int(match[1])
        return None

    def rows(self) -> list[Row]:
        """Every row of every timing file, checked; the first problem raises."""
        rows, seen = [], {}
        for path, blob in self.timing:
            for row in parse_timing(
                self.store.blob(blob, "timing"), path=path, commit=self.commit, problems=self.problems
            ):
                if row.key in seen and seen[row.key][0] != row.value:
                    raise KernelBenchFormatError(
                        f"the same key is also in {seen[row.key][1]} with other values",
                        path=path,
                        commit=self.commit,
                        place=f"{row.level} / {row.problem} ({row.hardware})",
                    )
                seen[row.key] = (row.value, path)
                rows.append(row)
        return rows

    def problem_text(self, blob: str) -> str:
        return self.store.blob(blob, "problems").decode("utf-8", errors="replace")


def parse_timing(data: bytes, *, path: str, commit: str, problems: dict) -> list[Row]:
    def fail(message, place=""):
        raise KernelBenchFormatError(message, path=path, commit=commit, place=place)

    try:
        document = json.loads(data.decode("utf-8"), parse_constant=lambda c: fail(f"{c} is not a number"))
    except UnicodeDecodeError as exc:
        fail(f"not UTF-8 (byte {exc.start})")
    except json.JSONDecodeError as exc:
        fail(f"not JSON: {exc.msg}", f"line {exc.lineno}, column {exc.colno}")
    if not isinstance(document, dict):
        fail("expected an object of levels")
    file_key = path.removeprefix(TIMING_DIR).removeprefix("old/")
    rows = []
    for level, files in document.items():
        if not LEVEL.match(level) or not isinstance(files, dict):
            fail("expected levelN: {problem file: row}", repr(level))
        for problem, row in files.items():
            place = f"{level} / {problem}"
            if row is None:
                continue  # upstream could not time the problem: no figure, no run
            rows.append(_row(row, path, file_key, level, problem, problems, fail, place))
    return rows


def _row(row, path, file_key, level, problem, problems, fail, place) -> Row:
    if not isinstance(row, dict):
        fail("expected a row object or null", place)
    if not problem.endswith(".py") or "/" in problem:
        fail("the key is not a problem file name", place)
    figures = {}
    for name in FIGURES:
        value = row.get(name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            fail(f"{name} is {value!r}, not a finite number >= 0", f"{place} / {name}")
        figures[name] = float(value)
    trials = row.get("num_trials")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        fail(f"num_trials is {trials!r}, not a positive integer", f"{place} / num_trials")
    if not figures["min"] <= figures["mean"] <= figures["max"]:
        fail(
            f"min {figures['min']:g} <= mean {figures['mean']:g} <= max {figures['max']:g} does not hold",
            place,
        )
    hardware = row.get("hardware")
    if not isinstance(hardware, str) or not hardware.strip() or len(hardware) > 150:
        fail(f"hardware is {hardware!r}, not a GPU's name", f"{place} / hardware")
    return Row(
        path=path,
        file_key=file_key,
        level=level,
        problem=problem,
        hardware=hardware.strip(),
        device=str(row.get("device", ""))[:50],
        num_trials=trials,
        problem_blob=problems.get((level, problem)),
        **figures,
    )


def versions(path: Path | str) -> list[Version]:
    """Every version, oldest first."""
    path = Path(path)
    if path.is_file() and path.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        return _index_versions(_ArchiveStore(path), str(path))
    if (path / "timing" / "INDEX.tsv").is_file():
        return _index_versions(_FolderStore(path), str(path))
    if (path / ".git").exists() or (path / "HEAD").is_file():
        return _git_versions(path)
    raise KernelBenchFormatError(
        f"{path}: neither a git clone of KernelBench, a folder with timing/INDEX.tsv, nor a .tar.xz of one"
    )


class _Store:
    def blob(self, blob: str, kind: str) -> bytes:
        raise NotImplementedError


class _FolderStore(_Store):
    def __init__(self, folder: Path):
        self.folder = folder

    def text(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")

    def blob(self, blob, kind):
        suffix = ".json" if kind == "timing" else ".py"
        try:
            return (self.folder / kind / f"{blob}{suffix}").read_bytes()
        except OSError:
            raise KernelBenchFormatError(f"no file {kind}/{blob}{suffix}", path=str(self.folder)) from None


class _ArchiveStore(_Store):
    def __init__(self, archive: Path):
        with tarfile.open(archive) as tar:
            # Regular files only, read in memory: nothing is extracted.
            self.members = {
                m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()
            }

    def text(self, name):
        if name not in self.members:
            raise KernelBenchFormatError(f"the archive has no {name}")
        return self.members[name].decode("utf-8")

    def blob(self, blob, kind):
        name = f"{kind}/{blob}{'.json' if kind == 'timing' else '.py'}"
        if name not in self.members:
            raise KernelBenchFormatError(f"the archive has no {name}")
        return self.members[name]


def _tsv(store, name: str, columns: set) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(store.text(name), newline=""), delimiter="\t"))
    missing = columns - set(rows[0] if rows else {})
    if missing:
        raise KernelBenchFormatError(f"missing column(s) {', '.join(sorted(missing))}", path=name)
    return rows


def _index_versions(store, where: str) -> list[Version]:
    problems: dict[str, dict] = {}
    for row in _tsv(store, "problems/INDEX.tsv", {"commit", "level", "file", "blob"}):
        problems.setdefault(row["commit"], {})[(row["level"], row["file"])] = row["blob"]
    found: dict[str, Version] = {}
    for line, row in enumerate(
        _tsv(store, "timing/INDEX.tsv", {"commit", "date", "subject", "path", "blob"}), start=2
    ):
        place = f"timing/INDEX.tsv, line {line}"
        commit = row["commit"].strip().lower()
        if not COMMIT.match(commit):
            raise KernelBenchFormatError(f"{commit!r} is not a full commit hash", path=where, place=place)
        if commit not in found:
            found[commit] = Version(
                commit, _date(row["date"], where, place), row["subject"], [], problems.get(commit, {}), store
            )
        found[commit].timing.append((row["path"], row["blob"]))
    return sorted(found.values(), key=lambda v: v.date)


def _git_versions(repository: Path) -> list[Version]:
    store = _GitStore(repository)
    log = store.git("log", "--first-parent", "--reverse", "--format=%H%x09%aI%x09%s", "--", TIMING_DIR)
    result = []
    for line in log.decode("utf-8", errors="replace").splitlines():
        commit, date, subject = line.split("\t", 2)
        timing, problems = [], {}
        listing = store.git("ls-tree", "-r", commit, "--", TIMING_DIR, "KernelBench/")
        for entry in listing.decode("utf-8", errors="replace").splitlines():
            meta, _, name = entry.partition("\t")
            blob = meta.split()[2]
            if name.startswith(TIMING_DIR) and name.endswith(".json"):
                timing.append((name, blob))
            elif match := PROBLEM_DIR.match(name):
                problems[(match["level"], match["file"])] = blob
        # A commit that deleted the whole folder lists nothing: every run it held is withdrawn.
        result.append(
            Version(commit, _date(date, str(repository), "git log"), subject, timing, problems, store)
        )
    if not result:
        raise KernelBenchFormatError(f"{repository}: git has no history of {TIMING_DIR}")
    return result


class _GitStore(_Store):
    def __init__(self, repository: Path):
        self.repository = repository

    def git(self, *args: str) -> bytes:
        try:
            done = subprocess.run(
                ["git", "-C", str(self.repository), *args],
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KernelBenchFormatError(f"git {' '.join(args)}: {exc}") from None
        if done.returncode != 0:
            raise KernelBenchFormatError(
                f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout

    def blob(self, blob, kind):
        return self.git("cat-file", "blob", blob)


def _date(value: str, where: str, place: str) -> datetime:
    try:
        date = datetime.fromisoformat(value.strip())
    except ValueError:
        raise KernelBenchFormatError(f"{value!r} is not an ISO 8601 date", path=where, place=place) from None
    if date.tzinfo is None:
        raise KernelBenchFormatError(f"{value!r} has no time zone", path=where, place=place)
    return date
