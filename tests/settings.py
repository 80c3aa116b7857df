"""Settings for the test suite: the project's own, with development defaults where unset."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "tests-only-not-secret")

from kernelindex.settings import *  # noqa: E402,F403

# Tests that start real processes (a Celery worker, a killed import) need a database those
# processes can open: on SQLite that is a file, not the default in-memory test database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
