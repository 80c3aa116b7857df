#!/usr/bin/env python3
"""Where a request's time goes, in process, through the WSGI handler gunicorn calls (every
middleware, the production settings, the Redis cache): each URL is requested once to warm (and
fill the page cache), then `--repeat` times under cProfile or the clock alone. Compare a page
with the floor (`/bench/floor/`) the same way the load benchmarks do, without the load's noise.

    BENCH_PG_PREFIX=ki_perf BENCH_REDIS_URL=redis://127.0.0.1:6379/11 \\
        .venv/bin/python bench/hit_profile.py /bench/floor/ / [--cookie 'sessionid=…'] [--profile]

The database is BENCH_PG_PREFIX's, as bench/sustained.py left it. For instruction counts, run it
under `valgrind --tool=callgrind` with `--repeat` large enough to hide the warm-up.
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402


def environ(path: str, cookie: str | None, accept_encoding: str | None) -> dict:
    path, _, query = path.partition("?")
    env = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    if cookie:
        env["HTTP_COOKIE"] = cookie
    if accept_encoding:
        env["HTTP_ACCEPT_ENCODING"] = accept_encoding
    return env


def request(app, path: str, cookie: str | None, accept_encoding: str | None) -> tuple[str, int]:
    status = []
    body = app(environ(path, cookie, accept_encoding), lambda s, h, *a: status.append(s))
    size = sum(len(chunk) for chunk in body)
    if hasattr(body, "close"):
        body.close()
    return status[0], size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repeat", type=int, default=500)
    parser.add_argument("--cookie")
    parser.add_argument("--gzip", action="store_true", help="send Accept-Encoding: gzip, as browsers do")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=35)
    args = parser.parse_args()
    os.environ.update(common.django_env(common.pg_url(common.PG_PREFIX), CONN_MAX_AGE="600"))
    from django.core.wsgi import get_wsgi_application

    app = get_wsgi_application()
    encoding = "gzip, deflate, br" if args.gzip else None
    for path in args.paths:
        for _ in range(3):
            status, size = request(app, path, args.cookie, encoding)
        # CPU time, not wall time: on a shared machine the waits for Redis and PostgreSQL are
        # mostly other people's work.
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        began, began_cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        for _ in range(args.repeat):
            request(app, path, args.cookie, encoding)
        if profiler:
            profiler.disable()
        per = (time.perf_counter() - began) / args.repeat
        cpu = (time.process_time() - began_cpu) / args.repeat
        print(
            f"{path}: {status}, {size} bytes, {1000 * per:.3f} ms a request, {1000 * cpu:.3f} ms of CPU",
            flush=True,
        )
        if profiler:
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
