"""The shell commands that README.md and docs/*.md show, read the way a reader copies them."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = {"", "sh", "bash", "console", "shell"}
INLINE = re.compile(r"`([^`\n]*manage\.py [^`\n]*)`")
MANAGE = re.compile(r"python3?\s+manage\.py\s+([a-z_]+)(.*)")

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


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def sections(text: str) -> dict[str, str]:
    """The text under each `## ` heading, by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def shell_lines(text: str) -> list[str]:
    """Every line of every fenced shell block, continuation lines joined."""
    lines = []
    for language, block in FENCE.findall(text):
        if language not in SHELL:
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
