"""Settings for the test suite: the project's own, with development defaults where unset.

Under pytest-xdist (`-n N`) each worker process gets a place of its own, so that two workers never
share state through anything outside their database: pytest-django gives each its own test
database (`test_<name>_gw0`, ...); here each gets its own var/ folder (SQLite file, embedded
broker, file cache, media), its own prefix for every key in the Redis broker (queues and kombu's
bookkeeping) and in the Redis cache (`web:gw0`, still under the `web:` that the GPU workers'
Redis users are refused). They are set in the environment, before the project's
settings read it, so the processes a test starts (Celery workers, gunicorn, manage.py) inherit the
same place.
"""

import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "tests-only-not-secret")
# The test process and the Celery workers it starts sign their reports as one registered test
# worker (tests/reruns/conftest.py registers its key in each test's database).
os.environ.setdefault("WORKER_NAME", "test-worker")

XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def _with_key_prefix(url: str, prefix: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["key_prefix"] = f"{query['key_prefix']}-{prefix}" if query.get("key_prefix") else prefix
    return urlunsplit(parts._replace(query=urlencode(query)))


def _worker_place(worker: str) -> None:
    """Once per worker process: the environment is inherited by every process a test starts, and
    a second import of this module must not nest a second level."""
    if os.environ.get("KERNELINDEX_TEST_WORKER") == worker:
        return
    os.environ["KERNELINDEX_TEST_WORKER"] = worker
    root = Path(os.environ.get("KERNELINDEX_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["KERNELINDEX_VAR_DIR"] = str(root / "xdist" / worker)
    os.environ["CELERY_BROKER_KEY_PREFIX"] = f"{worker}:"
    if os.environ.get("CACHE_URL", "").startswith(("redis://", "rediss://")):
        os.environ["CACHE_URL"] = _with_key_prefix(os.environ["CACHE_URL"], f"web:{worker}")


if XDIST_WORKER:
    _worker_place(XDIST_WORKER)

from django.conf import global_settings  # noqa: E402

from kernelindex.settings import *  # noqa: E402,F403

if not os.environ.get("WORKER_KEY_FILE"):
    WORKER_KEY_FILE = str(VAR_DIR / "test-worker.key")  # noqa: F405
    os.environ["WORKER_KEY_FILE"] = WORKER_KEY_FILE  # the workers a test starts read the same file
    if not os.path.exists(WORKER_KEY_FILE):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        _pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _fd = os.open(WORKER_KEY_FILE + f".{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(_fd, "wb") as _handle:
            _handle.write(_pem)
        os.replace(WORKER_KEY_FILE + f".{os.getpid()}", WORKER_KEY_FILE)  # whole, for parallel workers

# Tests that start real processes (a Celery worker, a killed import) need a database those
# processes can open: on SQLite that is a file, not the default in-memory test database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
    # A test database is thrown away after the run: its commits need not wait for the disk
    # (about 2 ms each otherwise; one whole load of the bundled data commits some 5,000 times,
    # and transactional tests and Celery workers commit too). WAL keeps the file consistent.
    DATABASES["default"]["OPTIONS"]["init_command"] += " PRAGMA synchronous=NORMAL;"  # noqa: F405

# Every user a test makes costs one password hash; Django's PBKDF2 is slow on purpose. The one
# PBKDF2 hasher here (tests/hashers.py) reads and writes the same algorithm's hashes.
PASSWORD_HASHERS = [
    "tests.hashers.OneIterationPBKDF2PasswordHasher",
    *(name for name in global_settings.PASSWORD_HASHERS if not name.endswith(".PBKDF2PasswordHasher")),
]
