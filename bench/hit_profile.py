#!/usr/bin/env python3
"""Where a request's time goes, in process, through the WSGI handler gunicorn calls (every
middleware, the production settings, the Redis cache): each URL is requested once to warm (and
fill the page cache), then `--repeat` times under cProfile or the clock alone. Compare a page
with the floor (`/bench/floor/`) the same way the load benchmarks do, without the load's noise.

    BENCH_PG_PREFIX=ki_perf BENCH_REDIS_URL=redis://127.0.0.1:6379/11 \\
        .venv/bin/python bench/hit_profile.py /bench/floor/ / [--cookie 'sessionid=…'] [--profile]

The database is BENCH_PG_PREFIX's, as bench/sustained.py left it. For instruction counts, run it
under `valgrind --tool=callgrind` with `--repeat` large enough to hide the warm-up.

Ratios, before and after a change: `--rounds N` requests the paths N times over, each round in a
process of its own; `--other DIR` runs another checkout's code the same way in turn with this
one's, round by round (`--other-cookie`: its own session, since a session names the sign-in
backends of the code that made it); `--report NAME` writes `bench/results/NAME.json` and `.md`:
each path's CPU a request and floor CPU / page CPU per round and their medians (the floor,
`/bench/floor/`, must be among the paths). Same command before and after:

    BENCH_PG_PREFIX=ki_perf BENCH_REDIS_URL=redis://127.0.0.1:6379/11 \\
        .venv/bin/python bench/hit_profile.py /bench/floor/ /runs/48/ --cookie 'sessionid=…' \\
        --rounds 3 --other ../before --other-cookie 'sessionid=…' --report hit-profile-moderator
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

THIS_ROOT = Path(__file__).resolve().parent.parent
# `--root DIR` (for `--other`): the code measured is that checkout's, this script the same.
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else THIS_ROOT
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

FLOOR = "/bench/floor/"


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


def measure(args) -> dict[str, float]:
    """Each path's CPU milliseconds a request, in this process (printed, and returned)."""
    os.environ.update(common.django_env(common.pg_url(common.PG_PREFIX), CONN_MAX_AGE="600"))
    from django.core.wsgi import get_wsgi_application

    app = get_wsgi_application()
    encoding = "gzip, deflate, br" if args.gzip else None
    measured = {}
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
        measured[path] = 1000 * cpu
        print(
            f"{path}: {status}, {size} bytes, {1000 * per:.3f} ms a request, {1000 * cpu:.3f} ms of CPU",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
        if profiler:
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
    return measured


def one_round(args, root: Path, cookie: str | None) -> dict[str, float]:
    """One round in a process of its own, running `root`'s code."""
    command = [sys.executable, __file__, *args.paths, "--repeat", str(args.repeat), "--json"]
    command += (
        ["--root", str(root)] + (["--cookie", cookie] if cookie else []) + (["--gzip"] if args.gzip else [])
    )
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"a round failed in {root}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(root: Path) -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    return found.stdout.strip() or "not a git checkout"


def rows_of(name: str, rounds: list[dict[str, float]], paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        cpu = [measured[path] for measured in rounds]
        ratios = [100 * measured[FLOOR] / measured[path] for measured in rounds]
        rows.append(
            {
                "checkout": name,
                "path": path,
                "CPU ms a request (median)": round(statistics.median(cpu), 3),
                "% of floor (median)": round(statistics.median(ratios), 1),
                "CPU ms, each round": ", ".join(f"{value:.3f}" for value in cpu),
                "% of floor, each round": ", ".join(f"{value:.1f}" for value in ratios),
            }
        )
    return rows


def compare(args) -> None:
    """`--rounds` rounds, this checkout's and `--other`'s in turn; the medians, and a report."""
    checkouts = {"this": (THIS_ROOT, args.cookie)}
    if args.other:
        checkouts["other"] = (Path(args.other).resolve(), args.other_cookie)
    rounds: dict[str, list] = {name: [] for name in checkouts}
    load = [round(os.getloadavg()[0], 1)]
    for number in range(args.rounds):
        for name, (root, cookie) in checkouts.items():
            rounds[name].append(one_round(args, root, cookie))
            print(f"round {number + 1}, {name}: {rounds[name][-1]}", flush=True)
        load.append(round(os.getloadavg()[0], 1))
    if FLOOR not in args.paths:
        return
    commits = {name: commit_of(root) for name, (root, _) in checkouts.items()}
    rows = [row for name in checkouts for row in rows_of(commits[name], rounds[name], args.paths)]
    columns = list(rows[0])
    title = (
        f"CPU of a request in process (bench/hit_profile.py), {args.repeat} requests a path a round, "
        f"{args.rounds} rounds"
        + (", the two checkouts in turn" if args.other else "")
        + f", load average (1 minute) {min(load)} to {max(load)}"
    )
    if not args.report:
        print(common.table(title, columns, rows), flush=True)
        return
    common.report(
        args.report,
        title,
        columns,
        rows,
        commits=commits,
        signed_in=bool(args.cookie),
        gzip=args.gzip,
        loadavg_1min_each_round=load,
        rounds=rounds,
    )


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
    parser.add_argument("--rounds", type=int, default=0, help="rounds, each in a process of its own")
    parser.add_argument("--other", help="another checkout, measured in turn with this one")
    parser.add_argument("--other-cookie", help="the cookie to send to the other checkout")
    parser.add_argument("--report", help="write bench/results/REPORT.json and .md")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds or args.other or args.report:
        args.rounds = args.rounds or 1
        return compare(args)
    measured = measure(args)
    if args.json:
        print(json.dumps(measured), flush=True)


if __name__ == "__main__":
    main()
