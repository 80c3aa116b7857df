#!/usr/bin/env python3
"""Fast for everyone (issue 16): the run, kernel, compare and API pages, anonymous and signed in,
in both server shapes, p50 and p99, each against the floor measured in the same run; and
gunicorn's worker-restart setting in the production shape.

    BENCH_PG_PREFIX=ki_h16_bench BENCH_REDIS_URL=redis://127.0.0.1:6379/13 \\
    BENCH_BROKER_URL=redis://127.0.0.1:6379/12 KERNELINDEX_VAR_DIR=var/bench-h16 \\
        .venv/bin/python bench/signed_in.py --port 8016 [--rounds 2] [--seconds 3] [--restarts]

Two shapes, one database (`BENCH_PG_PREFIX`, the bundled data, loaded once and reused):
* `bench`: bench/run.py's own server (`common.server`: gunicorn, 2 sync workers, no config file,
  no access log);
* `production`: `scripts/prod.py up --port PORT`: `deploy/gunicorn.conf.py` (its JSON access log,
  its `max_requests`), the Prometheus multiprocess folder, a Celery worker and beat beside it, on
  `BENCH_BROKER_URL` (broker) and `BENCH_REDIS_URL` (cache).
Both run `bench.settings` (production settings plus the floor view, `/bench/floor/`) with the
anonymous API throttle raised, as bench/run.py does, so the load measures pages and not 429s.

A signed-in visitor is a contributor (and, for the run page, a moderator) with a session made as
logging in makes one (`task.py session`); wrk sends its cookie. Every URL is requested once
anonymously first (the steady state between two registry writes), then each target runs under
`wrk -c4` for `--seconds`, `--rounds` times, and the medians are reported against the floor's.

`--restarts`: the production shape again under each `max_requests` setting (given to gunicorn
through `GUNICORN_CMD_ARGS`, which overrides the config file): the floor's and the cached run
page's throughput and p99, and the worker boots counted in gunicorn's log during the load.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from bench import common  # noqa: E402
from bench.run import prime  # noqa: E402
from bench.servers import port_free  # noqa: E402

PAGES = ["run page", "kernel page", "compare page", "api runs?kernel="]
BROKER_URL = os.environ.get("BENCH_BROKER_URL", common.REDIS_URL)
VAR_DIR = Path(os.environ.get("KERNELINDEX_VAR_DIR", Path(tempfile.gettempdir()) / "ki_perf_var"))
# gunicorn's worker recycling: what deploy/gunicorn.conf.py had (the issue's), and the others.
RESTART_SETTINGS = {
    "max_requests 2000, jitter 200 (before)": "--max-requests 2000 --max-requests-jitter 200",
    "max_requests 0 (never)": "--max-requests 0",
    "max_requests 100000, jitter 10000": "--max-requests 100000 --max-requests-jitter 10000",
}


def registry(everything: bool = False) -> str:
    """The bundled registry in BENCH_PG_PREFIX's database: loaded once, then reused. The bundled
    Liger data, or with `everything` all that ships (`manage.py load_bundled_data`: both sources,
    KernelIndex's controlled runs, the ceilings), as a deployment loads it."""
    url = common.pg_url(common.PG_PREFIX)
    if common.pg_exists(common.PG_PREFIX):
        with psycopg.connect(url) as conn:
            loaded = conn.execute("SELECT to_regclass('registry_benchmarkrun') IS NOT NULL").fetchone()[0]
            loaded = loaded and conn.execute("SELECT count(*) FROM registry_benchmarkrun").fetchone()[0]
        if loaded:
            common.manage(url, "migrate", "-v0")
            return url
    common.pg_recreate(common.PG_PREFIX)
    common.manage(url, "migrate", "-v0")
    print("loading the bundled data ...", flush=True)
    if everything:
        common.manage(url, "load_bundled_data")
    else:
        print(common.task(url, "load-bundled"), flush=True)
    return url


def role_cookies(url: str) -> dict[str, str]:
    """A session cookie for a contributor and for a moderator of the registry at `url`."""
    return {
        role: common.task(url, "session", f"bench-{role}", role)["cookie"]
        for role in ("contributor", "moderator")
    }


def production_env(url: str, gunicorn_args: str = "") -> dict:
    """What scripts/prod.py starts with: the bench's settings module and secret (so one session
    serves both shapes), production's own broker, log level and connection age."""
    return common.django_env(
        url,
        CELERY_BROKER_URL=BROKER_URL,
        CELERY_TASK_ALWAYS_EAGER="0",
        CONN_MAX_AGE="60",
        LOG_LEVEL="INFO",
        KERNELINDEX_VAR_DIR=VAR_DIR,
        BENCH_STATIC_ROOT=VAR_DIR / "static",
        GUNICORN_CMD_ARGS=gunicorn_args,
    )


@contextlib.contextmanager
def production(url: str, port: int, gunicorn_args: str = ""):
    """`scripts/prod.py up`, always `down` on the way out; yields the base URL and web log."""
    env = production_env(url, gunicorn_args)
    prod = [common.PYTHON, str(common.ROOT / "scripts" / "prod.py")]
    subprocess.run([*prod, "up", "--port", str(port)], cwd=common.ROOT, env=env, check=True)
    try:
        yield f"http://127.0.0.1:{port}", VAR_DIR / "prod" / "log" / "web.log"
    finally:
        subprocess.run([*prod, "down"], cwd=common.ROOT, env=env, check=False)


def targets(paths: dict, cookies: dict) -> dict:
    """(name, paths, headers) for every measured row: the floor, each page anonymous and signed
    in, and the run page for a moderator."""
    found = {"floor": (paths["floor"], None)}
    for page in PAGES:
        found[f"{page}, anonymous"] = (paths[page], None)
        found[f"{page}, signed in"] = (paths[page], {"Cookie": cookies["contributor"]})
    found["run page, moderator"] = (paths["run page"], {"Cookie": cookies["moderator"]})
    return found


def measure(base: str, paths: dict, cookies: dict, args) -> dict:
    chosen = targets(paths, cookies)
    for page_paths, headers in chosen.values():  # imports, connections and sessions warm
        common.wrk(base, page_paths, seconds=1, connections=args.connections, headers=headers)
    primed = prime(base, [p for page in PAGES for p in paths[page]])
    samples = {name: [] for name in chosen}
    for _ in range(args.rounds):
        for name, (page_paths, headers) in chosen.items():
            samples[name].append(
                common.wrk(
                    base, page_paths, seconds=args.seconds, connections=args.connections, headers=headers
                )
            )
    return {"primed": primed, "samples": samples, "loadavg_after": os.getloadavg()}


def rows_against_floor(samples: dict) -> list[dict]:
    floor = {key: common.median_of(samples["floor"], key) for key in ("rps", "p50_ms", "p99_ms")}
    rows = []
    for name, runs in samples.items():
        rps, p50, p99 = (common.median_of(runs, key) for key in ("rps", "p50_ms", "p99_ms"))
        rows.append(
            {
                "page": name,
                "rps": rps,
                "% of floor rps": 100 * rps / floor["rps"],
                "p50 ms": p50,
                "p50 / floor p50": p50 / floor["p50_ms"],
                "p99 ms": p99,
                "p99 / floor p99": p99 / floor["p99_ms"],
                "non-2xx": sum(r["errors"] for r in runs),
            }
        )
    return rows


def bench_shapes(url: str, cookies: dict, args) -> None:
    paths = common.task(url, "paths")
    for shape in args.shapes.split(","):
        print(f"[{shape}] pages under wrk ...", flush=True)
        if shape == "bench":
            with common.server(url) as base:
                result = measure(base, paths, cookies, args)
        else:
            with production(url, args.port) as (base, _):
                result = measure(base, paths, cookies, args)
        common.report(
            f"signed-in-{shape}",
            f"Pages against the floor, anonymous and signed in ({shape} server shape, bundled registry, "
            f"wrk -c{args.connections}, median of {args.rounds} × {args.seconds:g} s)",
            list(rows_against_floor(result["samples"])[0]),
            rows_against_floor(result["samples"]),
            goal="signed-in run page >= 15% of the floor's requests per second, kernel page >= 5%",
            shape=shape,
            raw=result,
        )


def boots(log: Path, offset: int) -> int:
    with log.open("rb") as handle:
        handle.seek(offset)
        return handle.read().count(b"Booting worker")


def bench_restarts(url: str, cookies: dict, args) -> None:
    paths = common.task(url, "paths")
    load = {
        "floor": (paths["floor"], None),
        "run page, anonymous": (paths["run page"], None),
        "run page, signed in": (paths["run page"], {"Cookie": cookies["contributor"]}),
    }
    rows, raw = [], {}
    for setting, gunicorn_args in RESTART_SETTINGS.items():
        print(f"[restarts] {setting} ...", flush=True)
        with production(url, args.port, gunicorn_args) as (base, log):
            prime(base, paths["run page"])
            offset, started = log.stat().st_size, time.monotonic()
            runs = {name: [] for name in load}
            for _ in range(args.rounds):
                for name, (page_paths, headers) in load.items():
                    runs[name].append(
                        common.wrk(
                            base, page_paths, seconds=args.restart_seconds, connections=8, headers=headers
                        )
                    )
            measured = time.monotonic() - started
            booted = boots(log, offset)
        raw[setting] = {"runs": runs, "boots": booted, "seconds": measured, "loadavg_after": os.getloadavg()}
        row = {"setting": setting, "worker boots": booted, "boots per 10 s": 10 * booted / measured}
        for name in load:
            row[f"{name} rps"] = common.median_of(runs[name], "rps")
            row[f"{name} p99 ms"] = common.median_of(runs[name], "p99_ms")
        rows.append(row)
    common.report(
        "restarts",
        f"gunicorn max_requests in the production shape (wrk -c8, median of {args.rounds} × "
        f"{args.restart_seconds:g} s per page)",
        list(rows[0]),
        rows,
        raw=raw,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8016, help="the production shape's port")
    parser.add_argument("--shapes", default="bench,production")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--restarts", action="store_true", help="also compare max_requests settings")
    parser.add_argument("--restart-seconds", type=float, default=10)
    parser.add_argument("--no-pages", action="store_true", help="only the restart comparison")
    args = parser.parse_args()
    if not port_free(args.port):
        raise SystemExit(f"port {args.port} is taken: pick another with --port")
    url = registry()
    cookies = role_cookies(url)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if not args.no_pages:
        bench_shapes(url, cookies, args)
    if args.restarts:
        bench_restarts(url, cookies, args)
    print(f"load average at the end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
