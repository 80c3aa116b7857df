"""Settings for the test suite: the project's own, with development defaults where unset."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "tests-only-not-secret")

from kernelindex.settings import *  # noqa: E402,F403
