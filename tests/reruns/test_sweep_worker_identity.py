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
