"""A target (a comparison group and an implementation) measured twice keeps one current run: the
later measurement supersedes the earlier (docs/reruns.md), whether the recorder measures it again
or the loader reads both from a file; the database refuses a second current run, and
`verify_registry` reports a pair planted where the constraint is gone."""

import gzip
import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from registry.models import BenchmarkRun, Change
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from tests.registry.test_run_integrity import verify
from tests.reruns.test_measured_changes import measured

pytestmark = pytest.mark.django_db


def current_pairs():
    seen, pairs = set(), []
    for key, implementation in BenchmarkRun.objects.current().values_list("comparison_key", "implementation"):
        if (key, implementation) in seen:
            pairs.append((key, implementation))
        seen.add((key, implementation))
    return pairs


class TestMeasuredAgain:
    def test_the_later_measurement_supersedes_the_earlier_and_ranks_alone(self, h200_run):
        first = measured(h200_run, 1.0)
        second = measured(h200_run, 1.3)

        first.refresh_from_db()
        second.refresh_from_db()
        assert first.superseded_by_id == second.pk
        assert (first.rank, first.group_size) == (None, None)
        assert second.is_current
        group = BenchmarkRun.objects.current().filter(comparison_key=second.comparison_key)
        assert second.group_size == group.count()
        assert group.filter(implementation=second.implementation).count() == 1
        assert current_pairs() == []

    def test_the_database_refuses_a_second_current_run_of_a_target(self, h200_run):
        first = measured(h200_run, 1.0)
        measured(h200_run, 1.3)

        with pytest.raises(IntegrityError), transaction.atomic():
            BenchmarkRun.objects.filter(pk=first.pk).update(superseded_by=None)


class TestVerifyRegistry:
    def test_a_planted_pair_is_reported(self, h200_run):
        first = measured(h200_run, 1.0)
        second = measured(h200_run, 1.3)
        assert verify()[0]
        # A database restored without the constraint: only verify_registry can see the pair.
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX one_current_run_per_target")
        BenchmarkRun.objects.filter(pk=first.pk).update(superseded_by=None)
        BenchmarkRun.objects.filter(pk=second.pk).update(rank=1, group_size=1)

        ok, output = verify()

        assert not ok
        assert "a second current run of implementation" in output
        assert f"beside run {min(first.pk, second.pk)}" in output


class TestLoader:
    def test_a_file_with_a_target_measured_twice_loads_one_current_run(self, tmp_path):
        # The shipped kto_loss file holds two targets measured twice on 2026-12-01.
        document = json.loads(
            gzip.decompress((BUNDLED_CONTROLLED_DIR / "nvidia-h200-kto_loss.json.gz").read_bytes())
        )
        path = tmp_path / "kto.json"
        path.write_text(json.dumps(document))

        controlled_runs_load(path=path)

        assert current_pairs() == []
        superseded = BenchmarkRun.objects.filter(superseded_by__isnull=False).select_related("superseded_by")
        assert superseded.count() == 2
        for run in superseded:
            assert run.superseded_by.observed_at > run.observed_at
            assert (run.superseded_by.comparison_key, run.superseded_by.implementation_id) == (
                run.comparison_key,
                run.implementation_id,
            )
        assert verify()[0]

    def test_loading_the_later_file_after_the_earlier_supersedes_the_loaded_run(self, tmp_path):
        document = json.loads(
            gzip.decompress((BUNDLED_CONTROLLED_DIR / "nvidia-h200-kto_loss.json.gz").read_bytes())
        )
        by_target: dict[str, list] = {}
        for entry in document["runs"]:
            run = entry["run"]
            by_target.setdefault((run["comparison_key"], entry["implementation"]["digest"]), []).append(entry)
        pair = sorted(
            next(v for v in by_target.values() if len(v) == 2), key=lambda e: e["run"]["observed_at"]
        )
        for name, entry in (("earlier", pair[0]), ("later", pair[1])):
            (tmp_path / f"{name}.json").write_text(json.dumps({**document, "runs": [entry]}))

        controlled_runs_load(path=tmp_path / "later.json")
        controlled_runs_load(path=tmp_path / "earlier.json")  # an older file, loaded after

        earlier = BenchmarkRun.objects.get(digest=pair[0]["run"]["digest"])
        later = BenchmarkRun.objects.get(digest=pair[1]["run"]["digest"])
        assert earlier.superseded_by_id == later.pk
        assert later.is_current and later.rank == 1


class TestChanges:
    def test_measuring_the_same_software_again_is_no_change(self, h200_run):
        measured(h200_run, 1.0)
        measured(h200_run, 1.7)  # +70%, as the shipped fused_moe pair

        assert not Change.objects.exists()

    def test_the_changes_page_and_the_feed_list_only_a_new_version(self, client, h200_run):
        measured(h200_run, 1.0)
        again = measured(h200_run, 1.7)  # the same software: not listed
        newer = measured(h200_run, 2.5, transformers="4.58.0")  # a new version: a regression

        change = Change.objects.get()
        assert (change.before_id, change.after_id) == (again.pk, newer.pk)
        page = client.get(reverse("registry:change-list"))
        feed = client.get(reverse("registry:change-feed"))
        assert page.status_code == feed.status_code == 200
        assert page.content.decode().count("+47.1%") >= 1 and "+70.0%" not in page.content.decode()
        assert feed.content.decode().count("<entry>") == 1 and "+70.0%" not in feed.content.decode()
