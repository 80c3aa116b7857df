"""What every browser test shares: Debian's chromium, driven by Playwright (never
`playwright install`), one browser per test."""

import gc
import threading
from pathlib import Path

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")


@pytest.fixture
def browser(monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")  # Playwright's loop runs in this thread
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield chromium
        chromium.close()
    connections_close_everywhere()


def connections_close_everywhere() -> None:
    """Close every database connection this thread opened, in whatever context. With Playwright's
    sync API running, Django's `connections` (context-local storage) gave the test's body a
    connection of its own, which nothing closed: it outlived the test and kept PostgreSQL from
    dropping the test database at the end of the run ("is being accessed by other users")."""
    for wrapper in gc.get_objects():
        if (
            issubclass(type(wrapper), BaseDatabaseWrapper)  # type(): a lazy object's class is not asked
            and wrapper.connection is not None
            and wrapper._thread_ident == threading.get_ident()
            and not wrapper.in_atomic_block
        ):
            wrapper.close()
