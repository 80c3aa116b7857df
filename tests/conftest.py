"""Fixtures for every test."""

import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def page_cache_empty():
    """Stored pages (registry/cache.py) live in the cache, outside the test's database
    transaction: each test starts with none, so no page rendered from another test's rows is
    served."""
    cache.clear()
    yield
