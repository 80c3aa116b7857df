"""Django-side work for the benchmarks, one command per child process (bench/common.task).

    python bench/task.py <command> [args]   (environment from bench.common.django_env)

Prints progress on stderr and one JSON line on stdout, last."""

import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import NoReverseMatch, reverse  # noqa: E402

from bench import generate  # noqa: E402
from registry.models import BenchmarkRun, Kernel  # noqa: E402
from registry.sources.liger.services import bundled_data_load, liger_import  # noqa: E402


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_load_bundled() -> dict:
    started = time.perf_counter()
    bundled_data_load()
    return {"seconds": time.perf_counter() - started, "runs": BenchmarkRun.objects.count()}


def cmd_grow(total: str) -> dict:
    """Grow the registry to `total` runs (bundled data first, then synthetic runs)."""
    total = int(total)
    started = time.perf_counter()
    if not BenchmarkRun.objects.exists():
        bundled_data_load()
    missing = total - BenchmarkRun.objects.count()
    result = generate.registry_grow(missing, log=log) if missing > 0 else {"runs": 0}
    return {**result, "seconds": time.perf_counter() - started, "total": BenchmarkRun.objects.count()}


def cmd_count() -> dict:
    return {"runs": BenchmarkRun.objects.count()}


def page_paths(per_page: int = 200) -> dict[str, list[str]]:
    """The URLs each page benchmark cycles through: many different rows, chosen the same way at
    every size (a fixed seed over the public runs), so caches cannot hide the database."""
    rng = random.Random(2448)
    max_pk = BenchmarkRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    candidates = sorted({rng.randint(1, max_pk) for _ in range(per_page * 3)})
    pks = list(
        BenchmarkRun.objects.public().filter(pk__in=candidates).values_list("pk", flat=True)[:per_page]
    )
    rng.shuffle(pks)
    slugs = list(Kernel.objects.order_by("slug").values_list("slug", flat=True))
    paths = {
        "floor": [reverse("bench-floor")],
        "run page": [reverse("registry:run-detail", args=[pk]) for pk in pks],
        "kernel page": [reverse("registry:kernel-detail", args=[slug]) for slug in slugs],
        "api runs?kernel=": [f"{reverse('run-list')}?kernel={slug}" for slug in slugs],
    }
    # The history's pages (issue 13): every change, by kernel and by kind; the API; the feed.
    changes = reverse("registry:change-list")
    paths["changes page"] = (
        [changes]
        + [f"{changes}?kernel={slug}" for slug in slugs]
        + [f"{changes}?kind={kind}" for kind in ("improvement", "regression", "uncertain")]
    )
    paths["api changes"] = [reverse("change-list")] + [
        f"{reverse('change-list')}?kernel={slug}" for slug in slugs
    ]
    paths["regressions feed"] = [reverse("registry:change-feed")] + [
        f"{reverse('registry:change-feed')}?kernel={slug}" for slug in slugs
    ]
    try:  # the compare page arrives with the public site (branch `site`)
        paths["compare page"] = _compare_paths(pks)
    except NoReverseMatch:
        pass
    return paths


def _compare_paths(pks: list[int]) -> list[str]:
    """Each sampled run against the #1 of its comparison group (what "compare with the best"
    links to), or against the next sampled run where it is alone."""
    keys = dict(BenchmarkRun.objects.filter(pk__in=pks).values_list("pk", "comparison_key"))
    best = dict(
        BenchmarkRun.objects.current()
        .filter(comparison_key__in=set(keys.values()), rank=1)
        .values_list("comparison_key", "pk")
    )
    pairs = []
    for position, pk in enumerate(pks):
        other = best.get(keys[pk])
        if other is None or other == pk:
            other = pks[(position + 1) % len(pks)]
        pairs.append(reverse("registry:compare", args=[pk, other]))
    return pairs


def cmd_paths() -> dict:
    return page_paths()


def cmd_queries() -> dict:
    """SQL queries per request for each page, over a sample of its URLs: min and max."""
    client = Client(HTTP_HOST="127.0.0.1")
    result = {}
    for page, paths in page_paths(per_page=20).items():
        counts, statuses = [], set()
        for path in paths[:20]:
            client.get(path)  # warm: first-request work (e.g. the site row) is not per page
            with CaptureQueriesContext(connection) as ctx:
                response = client.get(path)
            counts.append(len(ctx.captured_queries))
            statuses.add(response.status_code)
            reset_queries()
        result[page] = {
            "min": min(counts),
            "max": max(counts),
            "statuses": sorted(statuses),
            "sample": len(counts),
        }
    return result


def cmd_import(path: str, repeat: str = "2") -> dict:
    """Time liger_import of one file: the first import, then re-imports of the unchanged file."""
    timings = []
    for attempt in range(int(repeat)):
        started = time.perf_counter()
        summary = liger_import(path=path)
        timings.append({"seconds": time.perf_counter() - started, **summary.as_dict()})
        log(f"import {attempt + 1}: {timings[-1]}")
    return {"imports": timings, "runs": BenchmarkRun.objects.count()}


# Where an import's own time goes, by the file each function lives in (first match wins).
PROFILE_AREAS = (
    ("database driver and server (psycopg: SQL, COPY, waiting on PostgreSQL)", ("psycopg",)),
    ("Django ORM and transactions", ("django/db", "django/utils", "django/apps")),
    ("canonical JSON and digests", ("registry/digests.py", "json/", "hashlib", "rfc8785")),
    ("CSV parser and specs", ("registry/sources",)),
    (
        "changes judged after the import",
        ("registry/change_pages.py", "registry/services/changes.py", "registry/series.py"),
    ),
    (
        "import service (decide, rank, rows)",
        ("registry/services", "registry/competition_ranks.py", "registry/models.py"),
    ),
)


def cmd_import_profile(path: str) -> dict:
    """One first import under cProfile: own time summed by area, and the top functions."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.runcall(liger_import, path=path)
    seconds = time.perf_counter() - started
    stats = pstats.Stats(profiler).stats
    by_area: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.items():
        area = next((name for name, parts in PROFILE_AREAS if any(p in filename for p in parts)), "other")
        by_area[area] = by_area.get(area, 0.0) + own
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:25]
    return {
        "seconds": seconds,
        "by_area": dict(sorted(by_area.items(), key=lambda item: -item[1])),
        "top": [
            {"function": f"{Path(f).name}:{line} {name}", "own_s": own, "cumulative_s": cum, "calls": calls}
            for (f, line, name), (_, calls, own, cum, _) in top
        ],
    }


def cmd_import_phases(path: str) -> dict:
    """One first import timed by phase: up to the COPY of the runs (parse, specs, decisions),
    the COPY, from it to the commit (changes judged, the page cache), and the commit (the
    deferred foreign-key checks). For each: wall seconds, this process's CPU seconds and the
    PostgreSQL backend's (read from /proc: the server is on this machine), rounded to 0.01 s."""
    import os

    from django.db import connection as database

    from registry.sources.liger import services

    database.ensure_connection()
    with database.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    ticks = os.sysconf("SC_CLK_TCK")

    def server_cpu() -> float:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    marks = []

    def mark(name: str) -> None:
        marks.append((name, time.perf_counter(), time.process_time(), server_cpu()))

    def timed(function, before: str, after: str):
        def call(*args, **kwargs):
            mark(before)
            try:
                return function(*args, **kwargs)
            finally:
                mark(after)

        return call

    insert, commit = services._runs_insert, database.commit
    services._runs_insert = timed(insert, "up to the COPY", "the COPY of the runs")
    database.commit = timed(commit, "after the COPY, to the commit", "the commit")
    try:
        mark("start")
        liger_import(path=path)
        mark("after the commit")
    finally:
        services._runs_insert, database.commit = insert, commit
    return {
        "phases": [
            {
                "phase": name,
                "wall s": round(wall - before[1], 2),
                "Python CPU s": round(python - before[2], 2),
                "PostgreSQL CPU s": round(server - before[3], 2),
            }
            for before, (name, wall, python, server) in zip(marks, marks[1:], strict=False)
        ],
        "seconds": round(marks[-1][1] - marks[0][1], 2),
    }


def cmd_write_csv(path: str, n: str) -> dict:
    started = time.perf_counter()
    generate.write_csv(path, int(n))
    return {"seconds": time.perf_counter() - started, "bytes": Path(path).stat().st_size}


def cmd_session(username: str, role: str = "contributor") -> dict:
    """A signed-in visitor for the load generator: the user (a moderator with `role=moderator`)
    and a session as logging in makes one, returned as the cookie to send."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model

    from attestations.services import moderator_add

    user, _ = get_user_model().objects.get_or_create(
        username=username, defaults={"email": f"{username}@example.org"}
    )
    if role == "moderator":
        moderator_add(user=user)
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return {"cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}


def cmd_reruns(n: str) -> dict:
    from bench import reruns

    return reruns.measure(int(n))


COMMANDS = {
    "load-bundled": cmd_load_bundled,
    "grow": cmd_grow,
    "count": cmd_count,
    "paths": cmd_paths,
    "queries": cmd_queries,
    "import": cmd_import,
    "write-csv": cmd_write_csv,
    "reruns": cmd_reruns,
    "session": cmd_session,
    "import-profile": cmd_import_profile,
    "import-phases": cmd_import_phases,
}

if __name__ == "__main__":
    name, *args = sys.argv[1:]
    print(json.dumps(COMMANDS[name](*args), default=str), flush=True)
