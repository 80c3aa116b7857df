#!/usr/bin/env python3
"""Steady under sustained load (issue 38): the production shape (`scripts/prod.py up`: gunicorn
with `deploy/gunicorn.conf.py`, its memory guard instead of request-count recycling, a Celery
worker and beat beside it) under wrk for `--minutes`, with every page against the floor measured
before and after the load, in the same run.

    BENCH_PG_PREFIX=ki_sustained BENCH_REDIS_URL=redis://127.0.0.1:6379/13 \\
    BENCH_BROKER_URL=redis://127.0.0.1:6379/12 KERNELINDEX_VAR_DIR=var/bench-sustained \\
        .venv/bin/python bench/sustained.py --port 8017 [--minutes 10] [--seconds 5] [--rounds 2]

The registry is everything that ships (`load_bundled_data`), in BENCH_PG_PREFIX's database, loaded
once and reused.

1. Pages against the floor (`/bench/floor/`, a view that does no work): each anonymous page
   (home, search, the run, kernel and compare pages, the largest kernel page by bytes, the changes
   page, the API's run list), each as wrk asks for it (no Accept-Encoding: the whole page) and as a
   browser does (gzip accepted: the page cache's compressed copy), and the run page for a signed-in
   contributor and for a moderator, each under `wrk -c4` for `--seconds`, `--rounds` times;
   requests per second as % of the floor's.
2. The sustained load: two wrk processes at once for `--minutes`, every anonymous page's URLs in
   one (`-c6`) and the moderator's run pages in the other (`-c2`). gunicorn's access log (one JSON
   line a request, `time` to the second) gives the requests served in each second of the load;
   the worker boots and the memory guard's restarts are counted from the same log.
3. Pages against the floor again, after the load.

Prints the tables and writes `bench/results/sustained.json` and `.md`. Goals (issue 38): no second
of the load without a served request; the moderator's run page at 25% of the floor or more; every
anonymous page at 50% or more, the largest kernel page included (both ways).
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from bench.run import prime  # noqa: E402
from bench.servers import port_free  # noqa: E402
from bench.signed_in import production, registry, role_cookies, rows_against_floor  # noqa: E402

ANONYMOUS = [
    "home",
    "search",
    "run page",
    "kernel page",
    "largest kernel page",
    "compare page",
    "changes page",
    "api runs?kernel=",
]
# What every browser sends: an anonymous page then comes from the page cache's compressed copy
# (registry/cache.py). Each anonymous page is measured both ways; wrk alone sends no such header.
BROWSER_ENCODING = {"Accept-Encoding": "gzip, deflate, br, zstd"}
GOALS = {
    "run page, moderator": 25.0,
    **{f"{page}, anonymous": 50.0 for page in ANONYMOUS},
    **{f"{page}, anonymous, as a browser asks (gzip)": 50.0 for page in ANONYMOUS},
}


def page_paths(url: str, base: str) -> tuple[dict[str, list[str]], dict]:
    """bench/task.py's paths, with the home page, searches and the largest kernel page (by the
    bytes a visitor receives, measured here) added."""
    paths = common.task(url, "paths")
    paths["home"] = ["/"]
    paths["search"] = [f"/search/?q={query}" for query in ("geglu", "rms", "L1+%2319", "swiglu", "attention")]
    sizes = {path: len(common.get(base, path)[1]) for path in paths["kernel page"]}
    largest = max(sizes, key=sizes.get)
    paths["largest kernel page"] = [largest]
    return paths, {"path": largest, "bytes": sizes[largest]}


def targets(paths: dict, cookies: dict) -> dict:
    found = {"floor": (paths["floor"], None)}
    for page in ANONYMOUS:
        found[f"{page}, anonymous"] = (paths[page], None)
    for page in ANONYMOUS:
        found[f"{page}, anonymous, as a browser asks (gzip)"] = (paths[page], BROWSER_ENCODING)
    found["run page, contributor"] = (paths["run page"], {"Cookie": cookies["contributor"]})
    found["run page, moderator"] = (paths["run page"], {"Cookie": cookies["moderator"]})
    return found


def signed_in_registry() -> tuple[str, dict[str, str]]:
    """Everything that ships, in BENCH_PG_PREFIX's database (loaded once, then reused), and a
    session cookie for each signed-in role: what this script and bench/pages_ab.py measure."""
    url = registry(everything=True)
    return url, role_cookies(url)


def pages_ready(url: str, base: str, cookies: dict, servers: list[str]) -> tuple[dict, dict, dict]:
    """The pages measured (found on `base`) and each row's (paths, headers), with every server in
    `servers` warmed (imports, connections and sessions: one wrk second per row) and its anonymous
    pages primed (stored), for wrk and for a browser's gzip, so that the measured rounds see a
    steady server. Returns (paths, the largest kernel page, rows)."""
    paths, largest = page_paths(url, base)
    chosen = targets(paths, cookies)
    anonymous = [path for page in ANONYMOUS for path in paths[page]]
    for server in servers:
        for page_paths_, headers in chosen.values():
            common.wrk(server, page_paths_, seconds=1, connections=4, headers=headers)
        prime(server, anonymous)
        prime(server, anonymous, headers=BROWSER_ENCODING)
    return paths, largest, chosen


def rows_with_goals(samples: dict) -> list[dict]:
    """The rows against the floor, each with its goal (issue 38) and whether it held."""
    rows = rows_against_floor(samples)
    for row in rows:
        goal = GOALS.get(row["page"])
        row["goal %"] = goal if goal is not None else "-"
        row["held"] = "-" if goal is None else ("yes" if row["% of floor rps"] >= goal else "no")
    return rows


def against_floor(base: str, chosen: dict, args) -> list[dict]:
    samples = {name: [] for name in chosen}
    for _ in range(args.rounds):
        for name, (page_paths_, headers) in chosen.items():
            samples[name].append(
                common.wrk(base, page_paths_, seconds=args.seconds, connections=4, headers=headers)
            )
    return rows_with_goals(samples)


def wrk_process(base: str, paths: list[str], *, seconds: int, connections: int, headers=None):
    """A wrk process in the background over `paths`; returns (process, paths file)."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    handle.write("\n".join(paths) + "\n")
    handle.close()
    header_args = [arg for name, value in (headers or {}).items() for arg in ("-H", f"{name}: {value}")]
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", *header_args]
    command += ["-s", str(common.BENCH / "report.lua"), base, "--", handle.name]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True), handle.name


def wrk_result(process, paths_file: str) -> dict:
    out, _ = process.communicate()
    os.unlink(paths_file)
    line = next(line for line in out.splitlines() if line.startswith("WRKJSON "))
    raw = json.loads(line[len("WRKJSON ") :])
    return {
        "requests": raw["requests"],
        "rps": raw["requests"] / (raw["duration_us"] / 1e6),
        "p50_ms": raw["p50_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "errors": raw["non2xx"] + raw["socket_errors"],
    }


def served_per_second(log_text: str, first: int, last: int) -> dict[int, int]:
    """Requests the access log records in each whole second from `first` to `last` (epoch
    seconds), zero where none was served."""
    counts = collections.Counter()
    for line in log_text.splitlines():
        if '"gunicorn.access"' not in line:
            continue
        try:
            stamp = json.loads(line)["time"].strip("[]")
        except (ValueError, KeyError):
            continue
        second = int(datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z").timestamp())
        if first <= second <= last:
            counts[second] += 1
    return {second: counts.get(second, 0) for second in range(first, last + 1)}


def sustained(base: str, log: Path, paths: dict, cookies: dict, minutes: float) -> dict:
    seconds = round(minutes * 60)
    anonymous = [path for page in ANONYMOUS for path in paths[page]]
    offset, started = log.stat().st_size, time.time()
    runs = {
        "anonymous pages (-c6)": wrk_process(base, anonymous, seconds=seconds, connections=6),
        "moderator run pages (-c2)": wrk_process(
            base, paths["run page"], seconds=seconds, connections=2, headers={"Cookie": cookies["moderator"]}
        ),
    }
    results = {name: wrk_result(*run) for name, run in runs.items()}
    ended = time.time()
    with log.open("rb") as handle:
        handle.seek(offset)
        text = handle.read().decode("utf-8", "replace")
    # Whole seconds only: the first and the last are cut by wrk's start and end.
    per_second = served_per_second(text, int(started) + 1, int(ended) - 1)
    counts = list(per_second.values())
    return {
        "seconds": ended - started,
        "wrk": results,
        "seconds counted": len(counts),
        "seconds with no request served": sum(1 for count in counts if count == 0),
        "fewest served in a second": min(counts),
        "median served a second": sorted(counts)[len(counts) // 2],
        "worker boots": text.count("Booting worker"),
        "memory guard restarts": text.count("memory guard:"),
        "per_second": per_second,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8017)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seconds", type=float, default=5, help="each page's wrk run against the floor")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not port_free(args.port):
        raise SystemExit(f"port {args.port} is taken: pick another with --port")
    url, cookies = signed_in_registry()
    load_start = os.getloadavg()
    with production(url, args.port) as (base, log):
        paths, largest, chosen = pages_ready(url, base, cookies, [base])
        print("pages against the floor, before ...", flush=True)
        before = against_floor(base, chosen, args)
        print(f"sustained load for {args.minutes:g} minutes ...", flush=True)
        load = sustained(base, log, paths, cookies, args.minutes)
        print("pages against the floor, after ...", flush=True)
        after = against_floor(base, chosen, args)
    summary = {key: value for key, value in load.items() if key not in ("per_second", "wrk")}
    common.report(
        "sustained",
        f"Production shape, {args.minutes:g} minutes of sustained load (wrk -c6 anonymous pages and "
        f"-c2 moderator run pages at once), pages against the floor before and after (wrk -c4, median "
        f"of {args.rounds} × {args.seconds:g} s)",
        list(before[0]),
        before,
        after=after,
        load=summary,
        load_wrk=load["wrk"],
        per_second=load["per_second"],
        largest_kernel_page=largest,
        loadavg_start=load_start,
        loadavg_end=os.getloadavg(),
    )
    print(common.table("After the load", list(after[0]), after), flush=True)
    print(json.dumps({"load": summary, "wrk": load["wrk"], "largest": largest}, indent=1), flush=True)


if __name__ == "__main__":
    main()
