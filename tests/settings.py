"""Settings for the test suite: the project's own, with development defaults where unset."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "tests-only-not-secret")

from kernelindex.settings import *  # noqa: E402,F403

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not memory: Celery worker processes and threads in tests must see the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
