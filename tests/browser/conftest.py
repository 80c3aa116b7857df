"""What every browser test shares: Debian's chromium, driven by Playwright (never
`playwright install`), one browser per test."""

import threading
from pathlib import Path

import pytest
from django.db.backends.signals import connection_created

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")


@pytest.fixture
def browser(monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")  # Playwright's loop runs in this thread
    from playwright.sync_api import sync_playwright

    opened = OpenedHere()
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            yield chromium
            chromium.close()
    finally:
        opened.close()


class OpenedHere:
    """The database connections this thread opens from now on, in whatever context (Django's
    `connection_created` signal), until `close()` closes them. With Playwright's sync API running,
    Django's `connections` (context-local storage) gives the test's body a connection of its own,
    which nothing else closes: it outlived the test and kept PostgreSQL from dropping the test
    database at the end of the run ("is being accessed by other users")."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.connections = []
        connection_created.connect(self.note, weak=False)

    def note(self, sender, connection, **kwargs):
        if threading.get_ident() == self.thread:
            self.connections.append(connection)

    def close(self) -> None:
        """Stop noting, and close what was noted (a connection inside a transaction is left to
        whoever opened the transaction)."""
        connection_created.disconnect(self.note)
        for connection in self.connections:
            if connection.connection is not None and not connection.in_atomic_block:
                connection.close()
