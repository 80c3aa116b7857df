"""The shell commands that README.md and docs/*.md show, read the way a reader copies them.

Every fenced block of docs/*.md (docs/reports/ included) says what it is in its info string:

- ```text: not a command: output, a diagram, a file's content.
- ```sh {host=NAME} (or sql, redis, ... {host=NAME}): commands, run on the host NAME, one of
  HOSTS below. `dev` blocks run as written, in each file's order, in the fresh copy that the
  README walk serves (tests/docs/test_commands.py): on a CPU machine after the README's two
  commands, with the site's development database. Every other host is named for what the block
  needs that such a machine lacks, and tests/docs/test_commands.py runs those blocks too, as
  written and in file order, where this machine has it:
  - `postgres`: in a fresh copy, on a database of the test's own (created, migrated and dropped by
    the test) that `DATABASE_URL` names: the docs define that variable in prose and their blocks
    read it from the environment rather than write a URL of their own;
  - `pypi`: in a fresh copy, with pip's cache in a temporary folder;
  - `gpu` and `prod`: on the walked copy, like `dev` blocks (the commands with a CPU path).
- ```sh {host=NAME not-run="WHY"}: a block no test runs, and why: it needs a CUDA card, root,
  systemd, server-wide roles, or it is a benchmark of many minutes. Its `manage.py` lines, and
  its lines running a script of bench/ or scripts/ that has an argument parser, are still checked
  by those parsers.

A block with neither (a bare ``` or ```sh) is unclassified, and tests/docs/test_commands.py
fails on it. README.md's own blocks are walked by that file's README tests instead.
"""

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```([^`\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INFO = re.compile(r'^(\w*)\s*(?:\{host=([\w-]+)(?:\s+not-run="([^"]*)")?\})?\s*$')
SHELL = {"", "sh", "bash", "console", "shell"}
INLINE = re.compile(r"`([^`\n]*manage\.py [^`\n]*)`")
MANAGE = re.compile(r"python3?\s+manage\.py\s+([a-z_]+)(.*)")

# Where a command block runs: the `{host=NAME}` of its fence.
HOSTS = {
    "dev": "a CPU machine after the README's two commands, in the checkout (the test runs these)",
    "gpu": "a GPU host: a CUDA card, its own torch, the wheelhouse or an index",
    "postgres": "a machine with PostgreSQL and Redis on 127.0.0.1, as CI has (benchmarks, backups, prod.py)",
    "prod": "a production host: root, systemd, /srv/kernelindex and the site's settings",
    "pypi": "a machine that reaches PyPI",
}
NOT_A_COMMAND = "text"

# What a reader puts in place of the placeholders the docs write.
PLACEHOLDERS = {
    "USERNAME": "admin",
    "ID": "1",
    "RUN_ID": "1",
    "SLUG": "geglu",
    "VERSION": "0.8.5",
    "KERNEL": "geglu",
    "PATH": "path",
}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and host (None where its fence names none)."""

    path: Path
    line: int
    language: str
    host: str | None
    text: str
    classified: bool
    not_run: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for match in FENCE.finditer(text):
        info = INFO.match(match.group(1).strip())
        language, host = (info.group(1), info.group(2)) if info else (match.group(1).strip(), None)
        not_run = info.group(3) if info else None
        classified = bool(info) and (host in HOSTS if host else language == NOT_A_COMMAND)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line, language, host, match.group(2), classified, not_run))
    return found


def docs_files() -> list[Path]:
    """docs/*.md, docs/reports/ included: the files whose blocks carry a host."""
    return sorted((ROOT / "docs").rglob("*.md"))


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *docs_files()]


def sections(text: str) -> dict[str, str]:
    """The text under each `## ` heading, by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def shell_lines(text: str) -> list[str]:
    """Every line of every fenced shell block, continuation lines joined."""
    lines = []
    for info, block in FENCE.findall(text):
        if info.split(" ", 1)[0] not in SHELL:
            continue
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            lines.append(pending + line)
            pending = ""
    return [line for line in lines if line.strip()]


def manage_invocations(text: str) -> list[tuple[str, list[str], str]]:
    """(command, arguments, the line as written) for every `manage.py NAME ...` in fenced blocks
    and inline code, placeholders filled in as a reader would."""
    found = []
    candidates = shell_lines(text) + INLINE.findall(text)
    for line in candidates:
        for match in MANAGE.finditer(line):
            name, rest = match.groups()
            rest = rest.split(")", 1)[0] if "$(" in line[: match.start()] else rest
            found.append((name, arguments(rest), line.strip()))
    return found


def arguments(rest: str) -> list[str]:
    rest = re.sub(r"\[([^\]]*)\]", r"\1", rest)  # optional parts, as if given
    rest = rest.replace("...", " ")
    rest = re.sub(r"<[^>]*>", "x", rest)
    words = shlex.split(rest, comments=True)
    args = []
    for word in words:
        if word in {"|", "&&", ";", "||"}:
            break
        args.append(PLACEHOLDERS.get(word, word))
    return args


def block_lines(block: Block) -> list[str]:
    """The lines of one block as commands: continuation lines joined, comments and blanks left out."""
    return [line for line in shell_lines(f"```sh\n{block.text}```") if not line.lstrip().startswith("#")]
