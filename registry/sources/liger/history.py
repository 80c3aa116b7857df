"""The versions of Liger-Kernel's benchmark data file, oldest first, from a git clone of the
repository or from a folder laid out like registry/sources/liger/data/history/ (INDEX.tsv and one
CSV per version).

Upstream's benchmark script overwrites a row when it reruns a benchmark, so one release's file
holds only the latest value of each key; the repository's history holds the rest.
"""

import csv
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DATA_PATH = "benchmark/data/all_benchmark_data.csv"
INDEX = "INDEX.tsv"
PULL_REQUEST = re.compile(r"\(#(\d+)\)\s*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
GIT_TIMEOUT = 120


class HistoryError(Exception):
    """The history cannot be read; nothing was imported from it."""


@dataclass(frozen=True)
class Version:
    commit: str
    date: datetime
    pull_request: int | None
    subject: str
    read: Callable[[], bytes]  # the file's content at this version

    @property
    def data(self) -> bytes:
        return self.read()


def pull_request_of(subject: str) -> int | None:
    """GitHub's squash merges end the subject with the pull request: "... (#196)"."""
    match = PULL_REQUEST.search(subject)
    return int(match[1]) if match else None


def versions(path: Path | str) -> list[Version]:
    """Every version, oldest first; a git work tree or bare repository, or an INDEX.tsv folder."""
    path = Path(path)
    if (path / INDEX).is_file():
        return list(_folder_versions(path))
    if (path / ".git").exists() or (path / "HEAD").is_file():
        return list(_git_versions(path))
    raise HistoryError(f"{path}: neither a git repository nor a folder with {INDEX}")


def _folder_versions(folder: Path) -> Iterator[Version]:
    with (folder / INDEX).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    missing = {"commit", "author_date", "pr", "subject", "file"} - set(rows[0] if rows else {})
    if missing:
        raise HistoryError(f"{folder / INDEX}: missing column(s) {', '.join(sorted(missing))}")
    for line, row in enumerate(rows, start=2):
        file = folder / row["file"]
        if not file.is_file() or Path(row["file"]).name != row["file"]:
            raise HistoryError(f"{folder / INDEX}, line {line}: no file {row['file']!r} beside it")
        yield Version(
            commit=_commit(row["commit"], f"{INDEX}, line {line}"),
            date=_date(row["author_date"], f"{INDEX}, line {line}"),
            pull_request=int(row["pr"]) if row["pr"].strip().isdigit() else pull_request_of(row["subject"]),
            subject=row["subject"],
            read=file.read_bytes,
        )


def _git_log(repository: Path) -> str:
    """--follow finds the file under earlier names; --name-only gives the name at each commit.
    --follow compares the content of files added and removed beside it to find a rename, so a
    clone that lacks one such blob (a partial clone, a mirror without large test files) fails it:
    then the walk is made without --follow, under the file's present name."""
    log = ("log", "--format=%x00%H%x09%aI%x09%s", "--name-only")
    try:
        return _git(repository, *log, "--follow", "--", DATA_PATH)
    except HistoryError:
        return _git(repository, *log, "--", DATA_PATH)


def _git_versions(repository: Path) -> Iterator[Version]:
    out = _git_log(repository)
    entries = []
    for block in out.split("\x00")[1:]:
        header, _, names = block.partition("\n")
        commit, date, subject = header.split("\t", 2)
        name = next((n for n in names.splitlines() if n.strip()), DATA_PATH)
        entries.append((commit, date, subject, name))
    if not entries:
        raise HistoryError(f"{repository}: git has no history of {DATA_PATH}")
    for commit, date, subject, name in reversed(entries):
        exists = _git(repository, "ls-tree", "--name-only", commit, "--", name).strip()
        if not exists:
            continue  # the commit deleted the file: nothing to read at it
        yield Version(
            commit=_commit(commit, "git log"),
            date=_date(date, f"git log of {commit}"),
            pull_request=pull_request_of(subject),
            subject=subject,
            read=lambda commit=commit, name=name: _git_bytes(repository, "show", f"{commit}:{name}"),
        )


def _git_bytes(repository: Path, *args: str) -> bytes:
    try:
        result = subprocess.run(
            ["git", "-C", str(repository), *args], capture_output=True, timeout=GIT_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HistoryError(f"git {' '.join(args)}: {exc}") from None
    if result.returncode != 0:
        raise HistoryError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def _git(repository: Path, *args: str) -> str:
    return _git_bytes(repository, *args).decode("utf-8", errors="replace")


def _commit(value: str, where: str) -> str:
    value = value.strip().lower()
    if not COMMIT.match(value):
        raise HistoryError(f"{where}: {value!r} is not a full commit hash")
    return value


def _date(value: str, where: str) -> datetime:
    try:
        date = datetime.fromisoformat(value.strip())
    except ValueError:
        raise HistoryError(f"{where}: {value!r} is not an ISO 8601 date") from None
    if date.tzinfo is None:
        raise HistoryError(f"{where}: {value!r} has no time zone")
    return date
