"""A published run is immutable: the admin edits nothing of it, the database refuses impossible
measurements, and `verify_registry` finds any row that no longer matches its digest, its manifest
or its group's ranks."""

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.sources.liger.services import liger_import
from tests.registry.csvdata import bundled_rows, write_csv

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(tmp_path):
    liger_import(path=write_csv(tmp_path / "geglu.csv", bundled_rows()))
    return BenchmarkRun.objects.order_by("pk")


def verify() -> tuple[bool, str]:
    from io import StringIO

    out = StringIO()
    try:
        call_command("verify_registry", stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


class TestVerifyRegistry:
    def test_an_imported_registry_verifies(self, runs):
        ok, output = verify()

        assert ok, output
        assert f"{runs.count()} runs verified" in output

    def test_a_median_changed_behind_the_services_back_is_reported(self, runs):
        run = runs.filter(group_size__gt=1).first()
        edited = run.p80 * 2  # all three, so p20 <= median <= p80 still holds
        BenchmarkRun.objects.filter(pk=run.pk).update(p20=edited, median=edited, p80=edited)

        ok, output = verify()

        assert not ok
        assert (
            f"run {run.pk} ({run.external_id}): median is {edited!r} but the manifest says {run.median!r}"
            in output
        )

    def test_a_changed_manifest_no_longer_matches_the_digest(self, runs):
        run = runs.first()
        manifest = run.manifest
        manifest["items"][0]["metadata"]["labels"]["edited"] = "yes"
        BenchmarkRun.objects.filter(pk=run.pk).update(manifest=manifest)

        ok, output = verify()

        assert not ok
        assert f"run {run.pk} ({run.external_id}): digest {run.digest} but the manifest's is" in output

    def test_a_wrong_rank_is_reported(self, runs):
        run = runs.filter(group_size__gt=1, rank=1).first()
        BenchmarkRun.objects.filter(pk=run.pk).update(rank=2)

        ok, output = verify()

        assert not ok
        assert f"run {run.pk} ({run.external_id}): ranked 2 of {run.group_size}, but" in output

    def test_a_rank_on_a_withdrawn_run_is_reported(self, runs):
        run = runs.first()
        BenchmarkRun.objects.filter(pk=run.pk).update(withdrawn=True)

        ok, output = verify()

        assert not ok
        assert f"run {run.pk} ({run.external_id}): not current, yet ranked" in output


class TestDatabaseConstraints:
    @pytest.mark.parametrize(
        "change",
        [
            {"median": -1.0, "p20": -2.0},  # negative
            {"p20": 1e9},  # p20 above the median
            {"p80": 0.0},  # p80 below the median
            {"rank": 0},
            {"rank": 99},  # beyond its group
        ],
    )
    def test_impossible_values_are_refused(self, runs, change):
        run = runs.filter(group_size__gt=1).first()

        with pytest.raises(IntegrityError), transaction.atomic():
            BenchmarkRun.objects.filter(pk=run.pk).update(**change)

    def test_a_run_cannot_supersede_itself(self, runs):
        run = runs.first()

        with pytest.raises(IntegrityError), transaction.atomic():
            BenchmarkRun.objects.filter(pk=run.pk).update(superseded_by=run)


class TestAdminCannotEditARun:
    def test_a_superuser_sees_the_run_but_no_field_to_edit(self, runs, admin_client):
        run = runs.first()

        response = admin_client.get(reverse("admin:registry_benchmarkrun_change", args=[run.pk]))

        assert response.status_code == 200
        html = response.content.decode()
        for field in ("median", "p20", "p80", "workload", "environment", "withdrawn_at", "superseded_by"):
            assert f'name="{field}"' not in html

    def test_a_superusers_post_changes_nothing(self, runs, admin_client):
        run = runs.first()

        response = admin_client.post(
            reverse("admin:registry_benchmarkrun_change", args=[run.pk]),
            {"median": "1.0", "p20": "1.0", "p80": "1.0"},
        )

        assert response.status_code == 403
        run.refresh_from_db()
        assert (
            run.median
            == BenchmarkRun.objects.get(pk=run.pk).manifest["items"][0]["spec"]["results"]["median"]
        )

    @pytest.mark.parametrize(
        "model", ["benchmarkrun", "workload", "environment", "protocol", "implementation"]
    )
    def test_nor_add_nor_delete(self, runs, admin_client, model):
        obj = getattr(runs.first(), model if model != "benchmarkrun" else "kernel")
        pk = runs.first().pk if model == "benchmarkrun" else obj.pk

        add = admin_client.get(reverse(f"admin:registry_{model}_add"))
        delete = admin_client.get(reverse(f"admin:registry_{model}_delete", args=[pk]))

        assert (add.status_code, delete.status_code) == (403, 403)
