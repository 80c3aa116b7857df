"""Filtering a page of runs with the form class built once (registry/filters.py, FormClassOnce)
against django-filter's own way, a new form class per request, in one process, the two in turn:
each round times `--repeat` filter sets of each (built, validated, their queryset made; no query
sent), for a few query strings a visitor sends. Writes bench/results/filter-form.json and .md.

    DEBUG=1 .venv/bin/python bench/filter_form.py --rounds 5
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
import django  # noqa: E402

django.setup()
import django_filters  # noqa: E402
from django.http import QueryDict  # noqa: E402

from bench.common import report  # noqa: E402
from registry.filters import RunFilter  # noqa: E402
from registry.models import BenchmarkRun  # noqa: E402

QUERIES = (
    "kernel=geglu",
    "kernel=cross_entropy&sort=median&current=true",
    "gpu=nvidia-h200&metric=latency&param=T:4096",
)


class EveryRequest(RunFilter):
    """The baseline: django-filter's get_form_class, a new form class on every call."""

    def get_form_class(self):
        return django_filters.FilterSet.get_form_class(self)


def per_request_ms(filter_set, data: QueryDict, repeat: int) -> float:
    queryset = BenchmarkRun.objects.public()
    began = time.process_time()
    for _ in range(repeat):
        made = filter_set(data, queryset=queryset)
        assert made.is_valid(), made.form.errors
        made.qs  # noqa: B018 (the filtered queryset, built; not sent)
    return (time.process_time() - began) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    for query in QUERIES:
        data = QueryDict(query)
        once, every = [], []
        for _ in range(args.rounds):
            every.append(per_request_ms(EveryRequest, data, args.repeat))
            once.append(per_request_ms(RunFilter, data, args.repeat))
        rows.append(
            {
                "query": query,
                "form class per request, CPU ms (median)": statistics.median(every),
                "form class once, CPU ms (median)": statistics.median(once),
                "once / per request (median of rounds)": statistics.median(
                    o / e for o, e in zip(once, every, strict=True)
                ),
                "rounds": args.rounds,
            }
        )
    report(
        "filter-form",
        f"Filtering a page of runs, CPU a request: {args.rounds} rounds of {args.repeat}, the two in turn",
        list(rows[0]),
        rows,
    )


if __name__ == "__main__":
    main()
