"""Judging the shipped reruns again as a second `load_bundled_data` does, passing over those
already judged under today's rule (`reruns_rejudge(every=False)`, RerunJob.judged_under), against
judging every one again (`every=True`, as every load did before), in one process on one loaded
database, the two in turn; then the whole second load, for scale. Writes
bench/results/rejudge-skip.json and .md.

    DEBUG=1 .venv/bin/python bench/rejudge_skip.py --rounds 3

The database is a fresh SQLite file under a temporary folder (KERNELINDEX_VAR_DIR), migrated and
loaded once before the rounds; nothing outside that folder is written but the results.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["KERNELINDEX_VAR_DIR"] = tempfile.mkdtemp(prefix="ki-rejudge-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402

from bench.common import report  # noqa: E402
from registry.reruns.services.record import reruns_rejudge  # noqa: E402


def timed(work) -> tuple[float, float, object]:
    """(wall s, CPU s of this process, what `work` returned)."""
    wall, cpu = time.perf_counter(), time.process_time()
    done = work()
    return time.perf_counter() - wall, time.process_time() - cpu, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    first = timed(lambda: call_command("load_bundled_data", stdout=StringIO()))
    every, passed, judged = [], [], set()
    for _ in range(args.rounds):
        wall, cpu, changes = timed(lambda: reruns_rejudge(every=True))
        every.append((wall, cpu))
        judged.add(("every", sum(changes.values())))
        wall, cpu, changes = timed(lambda: reruns_rejudge(every=False))
        passed.append((wall, cpu))
        judged.add(("passed over", sum(changes.values())))
    second = timed(lambda: call_command("load_bundled_data", stdout=StringIO()))
    counts = dict(judged)
    ratio = statistics.median(p[0] / e[0] for p, e in zip(passed, every, strict=True))
    rows = [
        {
            "way": f"judge every rerun again ({counts['every']} judged)",
            "wall s (median)": statistics.median(w for w, _ in every),
            "CPU s (median)": statistics.median(c for _, c in every),
            "wall against judging every one (median of rounds)": 1.0,
            "rounds": args.rounds,
        },
        {
            "way": f"pass over those judged under today's rule ({counts['passed over']} judged)",
            "wall s (median)": statistics.median(w for w, _ in passed),
            "CPU s (median)": statistics.median(c for _, c in passed),
            "wall against judging every one (median of rounds)": ratio,
            "rounds": args.rounds,
        },
        *(
            {"way": f"the whole {which} load_bundled_data", "wall s (median)": wall, "CPU s (median)": cpu,
             "wall against judging every one (median of rounds)": "", "rounds": 1}
            for which, (wall, cpu, _) in (("first", first), ("second", second))
        ),
    ]  # fmt: skip
    report(
        "rejudge-skip",
        f"Judging the shipped reruns again on a loaded SQLite database: {args.rounds} rounds, the two ways in turn",
        list(rows[0]),
        rows,
    )


if __name__ == "__main__":
    main()
