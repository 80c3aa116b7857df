#!/usr/bin/env python3
"""Two checkouts side by side in the production shape: the pages of bench/sustained.py against
the floor, each measured on this checkout's server and on the other's in turn (the order swapped
every round), so that both see the same moments of a shared machine's load.

    BENCH_PG_PREFIX=ki_perf BENCH_REDIS_URL=redis://127.0.0.1:6379/11 \\
    BENCH_BROKER_URL=redis://127.0.0.1:6379/10 KERNELINDEX_VAR_DIR=var/bench-perf \\
        .venv/bin/python bench/pages_ab.py --other ../before --port 8027 --other-port 8028 \\
        --other-redis redis://127.0.0.1:6379/9 --other-broker redis://127.0.0.1:6379/8

The other checkout (`git worktree add ../before COMMIT`, or `git archive COMMIT | tar -x`) runs
its own `scripts/prod.py up` on the same database, with its own Redis databases. Prints both
tables and writes `bench/results/pages-ab.json` and `.md`.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from bench.servers import port_free  # noqa: E402
from bench.signed_in import production, production_env  # noqa: E402
from bench.sustained import pages_ready, rows_with_goals, signed_in_registry  # noqa: E402


def other_server(other: Path, url: str, args):
    env = production_env(url)
    env.update(CACHE_URL=args.other_redis, CELERY_BROKER_URL=args.other_broker)
    prod = [common.PYTHON, str(other / "scripts" / "prod.py")]
    return prod, env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--other", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8027)
    parser.add_argument("--other-port", type=int, default=8028)
    parser.add_argument("--other-redis", required=True)
    parser.add_argument("--other-broker", required=True)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for port in (args.port, args.other_port):
        if not port_free(port):
            raise SystemExit(f"port {port} is taken")
    other = args.other.resolve()
    url, cookies = signed_in_registry()
    load_start = os.getloadavg()
    with production(url, args.port) as (base, _):
        prod, env = other_server(other, url, args)
        subprocess.run([*prod, "up", "--port", str(args.other_port)], cwd=other, env=env, check=True)
        try:
            bases = {"this checkout": base, "other checkout": f"http://127.0.0.1:{args.other_port}"}
            _, largest, chosen = pages_ready(url, base, cookies, list(bases.values()))
            samples = {side: {name: [] for name in chosen} for side in bases}
            for number in range(args.rounds):
                order = list(bases) if number % 2 == 0 else list(reversed(bases))
                for name, (page_paths_, headers) in chosen.items():
                    for side in order:
                        samples[side][name].append(
                            common.wrk(bases[side], page_paths_, seconds=args.seconds, headers=headers)
                        )
        finally:
            subprocess.run([*prod, "down"], cwd=other, env=env, check=False)
    tables = {side: rows_with_goals(samples[side]) for side in bases}
    common.report(
        "pages-ab",
        f"This checkout and {other.name} side by side, production shape, pages against each one's floor "
        f"(wrk -c4, median of {args.rounds} × {args.seconds:g} s, alternating)",
        list(tables["this checkout"][0]),
        tables["this checkout"],
        other=tables["other checkout"],
        other_checkout=str(other.name),
        largest_kernel_page=largest,
        loadavg_start=load_start,
        loadavg_end=os.getloadavg(),
    )
    print(
        common.table(
            f"The other checkout ({other.name})", list(tables["other checkout"][0]), tables["other checkout"]
        )
    )


if __name__ == "__main__":
    main()
