"""In-process time of one page, split into SQL and the rest: the Django test client, production
settings (bench.common.django_env), every URL of the page once to warm, then `rounds` passes.

    cd CHECKOUT && python bench/page_timing.py PAGE [ROUNDS]     (PAGE: a key of task.page_paths)

It imports Django and the registry from the current directory, so the same script times two
checkouts (before and after a change) against the same database, alternately."""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())


def arguments() -> argparse.Namespace:
    """Parsed before Django is set up, so that a wrong argument is named without a database."""
    parser = argparse.ArgumentParser(description="In-process time of one page, SQL and the rest.")
    parser.add_argument("page", help="a key of bench.task.page_paths, e.g. 'kernel page'")
    parser.add_argument("rounds", type=int, nargs="?", default=1, help="passes over the page's URLs")
    return parser.parse_args()


def main(page: str, rounds: int) -> dict:
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.task import page_paths  # the checkout's own list of URLs

    paths = page_paths(per_page=20)[page]
    client = Client(HTTP_HOST="127.0.0.1")
    for path in paths:
        assert client.get(path).status_code == 200, path
    total, sql = [], []
    for _ in range(rounds):
        for path in paths:
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                client.get(path)
                total.append(time.perf_counter() - began)
            sql.append(sum(float(q["time"]) for q in queries.captured_queries))
    return {
        "page": page,
        "urls": len(paths),
        "requests": len(total),
        "median_ms": 1000 * statistics.median(total),
        "median_sql_ms": 1000 * statistics.median(sql),
        "queries": len(queries.captured_queries),
    }


if __name__ == "__main__":
    args = arguments()
    print(json.dumps(main(args.page, args.rounds)), flush=True)
