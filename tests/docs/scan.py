"""What the repository's tracked text files may not hold: lines that narrate the work by numbered
periods of work (an ordinal or a number beside the word for a sitting; tests/docs/test_no_narration.py
has examples), and a development machine's absolute paths.
Both checks read `git ls-files`, so a planted file must be added to the index to be seen, as a
commit would be."""

import functools
import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
    r"thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|"
    r"twenty-\w+|thirtieth|\d+(?:st|nd|rd|th))"
)
_LATE_ORDINAL = _ORDINAL.replace("first|second|third|", "")
_COUNT = r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|\w+ty(?:-\w+)?|\d+)"
NARRATION = re.compile(
    rf"\b{_ORDINAL}\s+(?:\w+\s+)?sessions?\b"  # an ordinal before it, a word between allowed
    rf"|\bsessions?\s+#?\d+\b"  # a number after it
    rf"|\b{_COUNT}\s+sessions\b"  # a count before the plural
    r"|\bsession\s+by\s+session\b|\bcall\s+by\s+call\b"
    r"|\b(?:each|every|this|next|previous)\s+session(?:'s)?\b"
    rf"|\bsession's\s+{_ORDINAL}\b"  # an ordinal after its possessive
    rf"|\bthe\s+{_LATE_ORDINAL}'s\s+(?:\w+\s+)?(?:card|host|call|jobs?|\d+)\b",  # a bare ordinal's host or card
    re.IGNORECASE,
)

# Spelled in pieces so that this file does not match itself.
_MACHINE_ROOTS = ("/" + "work/", "/" + "home/", "/" + "root/", "/" + "Users/")
MACHINE_PATH = re.compile(
    r"(?<![\w.:/-])(?:" + "|".join(re.escape(r) for r in _MACHINE_ROOTS) + r")[\w.-]"
    r"|(?<![\w.:/-])/" + r"tmp/(?:ki|kp|wt|work)[\w.-]*"
)

SKIPPED_SUFFIXES = {".gz", ".png", ".jpg", ".svg", ".ico", ".woff", ".woff2", ".sqlite3", ".whl"}


def tracked_text_files(root: Path = ROOT) -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.split(
        b"\0"
    )
    files = []
    for name in names:
        if not name:
            continue
        path = root / name.decode()
        if path.suffix in SKIPPED_SUFFIXES or not path.is_file():
            continue
        files.append(path)
    return files


@functools.cache
def _offending_in(path: Path, root: Path, mtime_ns: int, size: int, pattern: re.Pattern) -> tuple[str, ...]:
    """Cached by the file's mtime and size: the planted-line tests scan the tree several times."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ()
    if not pattern.search(text):
        return ()
    return tuple(
        f"{path.relative_to(root)}:{number}: {line.strip()[:160]}"
        for number, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    )


def offending_lines(pattern: re.Pattern, files: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in files:
        stat = path.stat()
        found.extend(_offending_in(path, root, stat.st_mtime_ns, stat.st_size, pattern))
    return found


def offending_lines_with_planted(pattern: re.Pattern, name: str, text: str) -> list[str]:
    """The offending lines of the tracked files with one more file, `tests/docs/<name>`, added to
    the index as a commit would add it. The file is planted in a repository of its own in a
    temporary folder: the checkout and its index stay untouched, since parallel workers scan them
    (and plant) at the same time."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        planted = root / "tests" / "docs" / name
        planted.parent.mkdir(parents=True)
        planted.write_text(text)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "--intent-to-add", str(planted)], cwd=root, check=True)
        found = offending_lines(pattern, tracked_text_files())
        return found + offending_lines(pattern, tracked_text_files(root), root)
