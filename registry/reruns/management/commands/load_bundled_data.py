import contextlib
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from tqdm import tqdm

from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.reruns.services.measured_ceilings import CeilingRejected, measured_ceilings_load
from registry.reruns.services.record import reruns_rejudge
from registry.services import ImportRejected
from registry.services.changes import changes_detect
from registry.sources import bundled_load_all
from registry.speed_of_light import speed_of_light_fill, speed_of_light_stale


class Command(BaseCommand):
    help = "Import every data set that ships with KernelIndex. Safe to run again: unchanged data changes nothing."

    def handle(self, *args, **options):
        bar = tqdm(desc="Loading bundled data", unit="row", disable=not sys.stderr.isatty(), file=sys.stderr)
        with sqlite_commits_unsynced():
            self._load(bar)

    def _load(self, bar):
        try:
            # Every registered source's shipped data, in registration order (registry/sources/).
            summaries = bundled_load_all(progress=bar.update)
            # KernelIndex's own controlled runs (registry/data/controlled-runs/), after the sources'
            # data whose workloads they measure.
            summaries["kernelindex-controlled"] = controlled_runs_load(path=BUNDLED_CONTROLLED_DIR)
            # Their reruns judged under today's rule (the files keep the verdicts of the day they
            # were recorded; the database keeps those as each job's earlier judgements). A rerun
            # already judged under today's rule is passed over: on a second load, every one.
            changes = reruns_rejudge(every=False)
            changed = sum(count for (before, now), count in changes.items() if before != now)
            summaries["verdicts"] = f"{sum(changes.values())} reruns judged again, {changed} changed"
            # Their series' steps too (the Liger data's were judged as each version was imported).
            changes_detect()
            # The GPU models' measured ceilings (registry/data/ceilings/): each new one fills its
            # GPU model's runs as it is created. Then the runs whose speed of light is older than
            # this code's formulas or datasheet figures, or was never computed; none, on a second
            # load.
            ceilings = measured_ceilings_load()
            summaries["ceilings"] = f"{ceilings} new measured ceilings"
            changed = speed_of_light_fill(runs=speed_of_light_stale())
            summaries["speed-of-light"] = f"{changed} runs' speed of light updated"
        except (ImportRejected, CeilingRejected) as exc:
            raise CommandError(f"Load refused, nothing was written. {exc}") from None
        finally:
            bar.close()
        for name, summary in summaries.items():
            self.stdout.write(self.style.SUCCESS(f"{name}: {summary}"))


@contextlib.contextmanager
def sqlite_commits_unsynced():
    """On SQLite, the load's thousands of commits without waiting for the disk each time
    (`synchronous=NORMAL`, SQLite's advice for WAL mode: the file stays consistent, and a power
    cut may lose only the last commits, which running the load again writes). About 2 ms a commit
    otherwise. PostgreSQL keeps its own settings, and so does a load inside a caller's transaction
    (SQLite refuses the change there; that transaction's one commit is the caller's)."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        (level,) = cursor.fetchone()
        cursor.execute("PRAGMA synchronous=NORMAL")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA synchronous={int(level)}")
