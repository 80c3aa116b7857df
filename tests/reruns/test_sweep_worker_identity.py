"""The sweep's own workers sign their reports: where the environment names no worker key, the
sweep makes one and registers it for its GPU model and the host's cards (on 2026-12-06 an H100
host's sweep, started as docs/gpu-hosts.md shows, had every job refused at its claim: its workers
held no key)."""

import stat
from unittest import mock

import pytest
from django.test import override_settings

from registry.reruns.models import WorkerKey
from registry.reruns.services import signing, worker_keys
from registry.reruns.sweep import workers

pytestmark = pytest.mark.django_db
CARD = "GPU-5e1f0c2a-0000-4000-8000-000000000001"


@override_settings(WORKER_NAME="", WORKER_KEY_FILE="")
def test_without_a_key_in_the_environment_the_sweep_registers_its_own(tmp_path):
    with mock.patch.object(workers, "local_gpus", return_value=(("nvidia-h200", CARD),)):
        env = workers.worker_identity(gpu_slug="nvidia-h200", gpus=1, folder=tmp_path / "keys")
    key = WorkerKey.objects.get(name=env["WORKER_NAME"])
    assert (key.gpu_slug, key.cards, key.revoked_at) == ("nvidia-h200", [CARD], None)
    assert stat.S_IMODE((tmp_path / "keys" / f"{key.name}.key").stat().st_mode) == 0o600

    # What a worker started with that environment signs, the web tier opens as that key's.
    with override_settings(**env):
        report = signing.worker_report("claim", job=7, card=CARD)
    opened, body = worker_keys.report_open(report, kind="claim")
    assert (opened.name, body["job"], body["card"]) == (key.name, 7, CARD)


@override_settings(WORKER_NAME="", WORKER_KEY_FILE="")
def test_a_cpu_sweep_registers_a_key_without_cards(tmp_path):
    env = workers.worker_identity(gpu_slug="cpu", gpus=1, folder=tmp_path)
    assert WorkerKey.objects.get(name=env["WORKER_NAME"]).cards == []


def test_a_key_the_environment_names_is_used_and_none_made(tmp_path):
    before = WorkerKey.objects.count()
    assert workers.worker_identity(gpu_slug="cpu", gpus=1, folder=tmp_path) == {}
    assert WorkerKey.objects.count() == before and not list(tmp_path.iterdir())


class TestTheSweepsKeyIsReused:
    """A GPU host runs the sweep again and again: its key and registration are made once, not
    once a run (they accumulated in the host's registry)."""

    @pytest.fixture(autouse=True)
    def no_key_in_the_environment(self, settings):
        settings.WORKER_NAME = settings.WORKER_KEY_FILE = ""

    def identity(self, folder, cards=(CARD,)):
        with mock.patch.object(workers, "local_gpus", return_value=tuple(("nvidia-h200", c) for c in cards)):
            return workers.worker_identity(gpu_slug="nvidia-h200", gpus=len(cards), folder=folder)

    def test_a_second_sweep_signs_with_the_first_ones_key(self, tmp_path):
        first = self.identity(tmp_path)
        assert self.identity(tmp_path) == first
        assert WorkerKey.objects.filter(name__startswith="sweep-").count() == 1
        assert [path.name for path in tmp_path.iterdir()] == [f"{first['WORKER_NAME']}.key"]

    def test_a_revoked_key_is_not_reused(self, tmp_path):
        first = self.identity(tmp_path)
        worker_keys.worker_key_revoke(name=first["WORKER_NAME"])
        second = self.identity(tmp_path)
        assert second["WORKER_NAME"] != first["WORKER_NAME"]
        assert WorkerKey.objects.get(name=second["WORKER_NAME"]).revoked_at is None

    def test_a_key_registered_for_fewer_cards_is_not_reused(self, tmp_path):
        other = "GPU-5e1f0c2a-0000-4000-8000-000000000002"
        first = self.identity(tmp_path)
        second = self.identity(tmp_path, cards=(CARD, other))
        assert second["WORKER_NAME"] != first["WORKER_NAME"]
        assert WorkerKey.objects.get(name=second["WORKER_NAME"]).cards == sorted([CARD, other])

    def test_a_key_file_whose_registration_is_gone_or_another_key_is_not_reused(self, tmp_path):
        first = self.identity(tmp_path)
        WorkerKey.objects.filter(name=first["WORKER_NAME"]).delete()
        second = self.identity(tmp_path)
        assert second["WORKER_NAME"] != first["WORKER_NAME"]
        # The second one's file replaced by a key it was not registered with.
        pem, _ = signing.private_key_generate()
        (tmp_path / f"{second['WORKER_NAME']}.key").write_bytes(pem)
        third = self.identity(tmp_path)
        assert third["WORKER_NAME"] not in (first["WORKER_NAME"], second["WORKER_NAME"])
