"""The production settings plus one URL: the framework's floor (see bench/urls.py).

Everything else (middleware, DEBUG off, database, cache, throttling) comes from the environment
exactly as in production; bench/common.django_env sets the variables."""

import os

from kernelindex.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
if os.environ.get("BENCH_STATIC_ROOT"):
    # The server: collectstatic went to a temporary folder, never into the checkout.
    STATIC_ROOT = os.environ["BENCH_STATIC_ROOT"]
else:
    # In-process work (query counts, imports) renders pages without a collected manifest.
    STORAGES = {
        **STORAGES,  # noqa: F405
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
