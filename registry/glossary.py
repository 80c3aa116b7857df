"""The site's glossary, read from docs/glossary.md: one text for the docs and the page, so the two
cannot disagree. Each `## Term` heading and the paragraphs under it make one entry; `code` spans
are kept as code, everything else is escaped."""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify

GLOSSARY_MD = Path(settings.BASE_DIR) / "docs" / "glossary.md"


@dataclass(frozen=True)
class Entry:
    term: str
    anchor: str
    paragraphs: tuple[SafeString, ...]


def _inline(text: str) -> SafeString:
    parts = re.split(r"`([^`]*)`", " ".join(text.split()))
    return mark_safe(
        "".join(
            f"<code>{escape(part)}</code>" if index % 2 else escape(part) for index, part in enumerate(parts)
        )
    )


@functools.cache
def glossary_entries() -> tuple[Entry, ...]:
    sections = re.split(r"^## (.+)$", GLOSSARY_MD.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return tuple(
        Entry(
            term=term.strip(),
            anchor=term_anchor(term),
            paragraphs=tuple(_inline(p) for p in re.split(r"\n\s*\n", body.strip()) if p.strip()),
        )
        for term, body in zip(sections[1::2], sections[2::2], strict=True)
    )


def term_anchor(term: str) -> str:
    """The entry's id on /glossary/: the slug of its term ("sw_power_cap" → "sw_power_cap")."""
    return slugify(term.replace("%", "percent")) or "term"
