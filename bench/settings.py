"""The production settings plus one URL: the framework's floor (see bench/urls.py).

Everything else (middleware, DEBUG off, database, cache, throttling) comes from the environment
exactly as in production; bench/run.py sets the variables."""

import os

from kernelindex.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
# A temporary collectstatic target, so the benchmark never writes into the checkout.
STATIC_ROOT = os.environ.get("BENCH_STATIC_ROOT", STATIC_ROOT)  # noqa: F405
