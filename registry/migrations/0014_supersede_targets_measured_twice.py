"""Targets measured twice (82 comparison groups held two current controlled runs of one
implementation, measured on 2026-12-01 and 2026-12-02 on H200 cards): the later measurement of
each target supersedes the earlier (docs/reruns.md), the groups are ranked again, and the steps
between two measurements of the same software are no longer changes. Works on a loaded registry
and on an empty one; a fresh load gets the same result from the loader."""

from django.db import migrations
from django.db.models import F

from registry.competition_ranks import competition_ranks


def supersede_earlier(apps, schema_editor):
    Run = apps.get_model("registry", "BenchmarkRun")
    Change = apps.get_model("registry", "Change")
    current = Run.objects.filter(withdrawn=False, superseded_by__isnull=True)
    targets: dict[tuple, list] = {}
    for pk, key, implementation in current.order_by("observed_at", "pk").values_list(
        "pk", "comparison_key", "implementation_id"
    ):
        targets.setdefault((key, implementation), []).append(pk)
    keys = set()
    for (key, _), pks in targets.items():
        if len(pks) > 1:
            Run.objects.filter(pk__in=pks[:-1]).update(superseded_by_id=pks[-1], rank=None, group_size=None)
            keys.add(key)
    members: dict[str, list] = {}
    for pk, key, median in current.filter(comparison_key__in=keys).values_list(
        "pk", "comparison_key", "median"
    ):
        members.setdefault(key, []).append((pk, median))
    for group in members.values():
        for (pk, _), rank in zip(group, competition_ranks([m for _, m in group]), strict=True):
            Run.objects.filter(pk=pk).update(rank=rank, group_size=len(group))
    # A step between two runs of one implementation on one environment whose software versions
    # are recorded is KernelIndex measuring the same software again (services/changes.py).
    Change.objects.filter(
        before__implementation=F("after__implementation"),
        before__environment=F("after__environment"),
    ).exclude(after__environment__software={}).delete()


class Migration(migrations.Migration):
    dependencies = [("registry", "0013_jobs_moved_to_reruns_app")]

    operations = [migrations.RunPython(supersede_earlier, migrations.RunPython.noop)]
