"""A GPU worker with no usable worker key refuses to start, with one line and a non-zero exit: it
would otherwise take jobs, have every claim refused and leave them queued, so that a sweep waited
to its deadline. A worker that serves no GPU queue signs nothing and starts as before."""

import subprocess
from types import SimpleNamespace

import pytest
from celery.exceptions import SecurityError
from django.test import override_settings

from registry.reruns import worker_startup
from registry.reruns.services.signing import worker_key_problem
from registry.reruns.worker_startup import WorkerKeyCheck, gpu_queues
from tests.reruns.worker import ROOT, Worker


def worker_serving(*queues):
    """What the bootstep reads of a worker: the queues it consumes."""
    return SimpleNamespace(
        app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=queues)))
    )


class TestWhatMakesAKeyUsable:
    def test_the_test_workers_key_is_usable(self):
        assert worker_key_problem() == ""

    @override_settings(WORKER_NAME="")
    def test_a_worker_without_a_name_has_no_usable_key(self):
        assert "WORKER_NAME and WORKER_KEY_FILE" in worker_key_problem()

    def test_a_missing_key_file_is_named(self, tmp_path):
        with override_settings(WORKER_KEY_FILE=str(tmp_path / "gone.key")):
            assert (
                worker_key_problem()
                == f"WORKER_KEY_FILE {tmp_path / 'gone.key'} cannot be read: No such file or directory"
            )

    def test_a_file_that_is_no_private_key_is_refused(self, tmp_path):
        (tmp_path / "public.key").write_text("not a PEM private key\n")
        with override_settings(WORKER_KEY_FILE=str(tmp_path / "public.key")):
            assert "holds no unencrypted Ed25519 private key" in worker_key_problem()


class TestTheBootstep:
    @override_settings(WORKER_KEY_FILE="")
    def test_a_gpu_queue_without_a_key_refuses(self):
        with pytest.raises(
            SecurityError, match=r"^This GPU worker \(gpu.nvidia-h200\) cannot sign its reports"
        ):
            WorkerKeyCheck(worker_serving("gpu.nvidia-h200", "default"))

    @override_settings(WORKER_KEY_FILE="", WORKER_NAME="", GPU_WORKER=False)
    def test_a_worker_on_the_default_queue_alone_needs_no_key(self, monkeypatch):
        asked = checked_keys(monkeypatch)
        assert worker_key_problem()  # no usable key here, so a check would refuse
        worker = worker_serving("default")
        WorkerKeyCheck(worker)
        assert gpu_queues(worker) == []
        assert asked == []  # the key was never looked at

    @override_settings(WORKER_KEY_FILE="", WORKER_NAME="", GPU_WORKER=True)
    def test_the_gpu_worker_role_needs_a_key_whatever_its_queues(self):
        with pytest.raises(SecurityError, match=r"^This GPU worker \(the gpu-worker role\) cannot sign"):
            WorkerKeyCheck(worker_serving("default"))

    def test_a_gpu_queue_with_a_usable_key_starts(self, monkeypatch):
        asked = checked_keys(monkeypatch)
        WorkerKeyCheck(worker_serving("gpu.cpu", "default"))
        assert asked == [""]  # the key was checked once, and found usable


def checked_keys(monkeypatch) -> list[str]:
    """What the bootstep's key checks answered, in order."""
    answers = []

    def recorded():
        answers.append(worker_key_problem())
        return answers[-1]

    monkeypatch.setattr(worker_startup, "worker_key_problem", recorded)
    return answers


def test_a_real_gpu_worker_without_its_key_file_exits_at_once_with_one_line(tmp_path):
    worker = Worker(tmp_path, WORKER_KEY_FILE=str(tmp_path / "absent.key"))
    out = subprocess.run(
        worker.command(), cwd=ROOT, env=worker.env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    refusals = [line for line in out.stderr.splitlines() if "cannot sign its reports" in line]
    assert refusals == [
        f"This GPU worker (gpu.cpu) cannot sign its reports: WORKER_KEY_FILE {tmp_path / 'absent.key'} "
        "cannot be read: No such file or directory."
    ]
    assert " ready." not in out.stdout + out.stderr
