"""Helpers for tests that run real processes against the test database."""

import os
import sys
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_url(name: str | None = None) -> str:
    """The URL of the database the test run is using, for a child process to open; with `name`,
    another database on the same PostgreSQL server (the one place tests build such a URL)."""
    settings = connection.settings_dict
    if settings["ENGINE"] == "django.db.backends.sqlite3" and name is None:
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    user = settings["USER"] or "postgres"
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    host = f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    return f"postgres://{user}{password}@{host}/{name or settings['NAME']}"


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env.update(
        {"DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "kernelindex.settings", "DEBUG": "1"}
    )
    env.update(extra)
    return env


def manage(*args) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]
