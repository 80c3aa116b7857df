"""Fixtures for every test."""

import pytest
from django.core.cache import cache

from registry.reruns.harness.cache import harness_fetch


@pytest.fixture(autouse=True)
def page_cache_empty():
    """Stored pages (registry/cache.py) live in the cache, outside the test's database
    transaction: each test starts with none, so no page rendered from another test's rows is
    served."""
    cache.clear()
    yield


@pytest.fixture(scope="session")
def harness_root():
    """The pinned liger-kernel sdist, downloaded once into KERNELINDEX_HARNESS_DIR if missing."""
    return harness_fetch()


@pytest.fixture(autouse=True)
def harness_for_workers(request):
    """A test marked `worker` runs a real Celery worker, whose jobs run the real harness: it is
    fetched first, so such a test passes when run on its own on a fresh machine too."""
    if request.node.get_closest_marker("worker"):
        request.getfixturevalue("harness_root")
