"""Issue 36, findings 2 and 3, tried with what a GPU worker is given (scripts/prod.py, docs/deploy.md):
its own Redis ACL user (`gpu_acl_rules`) and an env file without DATABASE_URL, CACHE_URL,
SECRET_KEY or JOB_SIGNING_KEY.

- The ACL user reaches the broker's keys it needs and none of the web tier's: not the page cache,
  not the sessions, not by SELECTing the cache's database, not even their names by SCAN or KEYS.
- Real Celery workers split as in production (a GPU worker with KERNELINDEX_ROLE=gpu-worker and only
  that ACL user, a central worker on the default queue) take a rerun to `reproduced`: the worker
  needs no database credential.
- With those same credentials, a forged result (unsigned, or signed by a key nobody registered)
  changes nothing.

Real Redis ACLs on the test's Redis: each test makes uniquely named users and deletes them.
"""

import os
import time
import uuid
from functools import partial
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from registry.models import BenchmarkRun
from registry.reruns.models import JobState
from registry.reruns.services import rerun_request
from registry.reruns.services.signing import job_verify_key_text, private_key_generate
from tests.faults.support import figure, needs_redis, small_cpu_rows
from tests.reruns.conftest import TEST_WORKER, csv_import, harness_result, worker_key_for_tests
from tests.reruns.worker import WORKER_ENV, Worker, broker_clear, broker_key, broker_prefix, celery_app_for
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
pytestmark = needs_redis


def prod_module():
    return load_script("prod")


PROD = prod_module()


@pytest.fixture
def gpu_user():
    """A GPU worker's ACL user for gpu.cpu, made as scripts/prod.py makes it; deleted after."""
    admin = settings.CELERY_BROKER_URL
    name, password = f"ki-test-gpu-{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    PROD.acl_apply(admin, [[name, password, PROD.gpu_acl_rules("cpu", broker_prefix())]])
    try:
        yield {"name": name, "url": PROD.url_as(admin, name, password)}
    finally:
        PROD.acl_apply(admin, [[name, None, None]])


def as_user(url: str, db: int | None = None) -> redis.Redis:
    client = redis.Redis.from_url(url)
    if db is not None:
        client = redis.Redis.from_url(url.rsplit("/", 1)[0] + f"/{db}")
    return client


def refused(call) -> bool:
    try:
        call()
    except redis.exceptions.NoPermissionError:
        return True
    return False


@pytest.mark.django_db
class TestTheGpuWorkersAclUser:
    def test_it_can_neither_read_nor_write_the_page_cache_or_sessions(self, gpu_user):
        cache_db = int(settings.CACHES["default"].get("LOCATION", "/0").rsplit("/", 1)[-1] or 0)
        cache.set("kernelindex:registry-generation", 1)
        session = cache.make_key("django.contrib.sessions.cached_db" + "s" * 32)
        generation = cache.make_key("kernelindex:registry-generation")
        checks = []
        for db in sorted({cache_db, 0, int(settings.CELERY_BROKER_URL.rsplit("/", 1)[-1] or 0)}):
            client = as_user(gpu_user["url"], db)
            for key in (generation, session, cache.make_key("kernelindex:page:2026-12-05:x")):
                checks += [refused(partial(client.get, key)), refused(partial(client.set, key, b"x"))]
                checks += [refused(partial(client.delete, key)), refused(partial(client.dump, key))]
            checks += [refused(partial(client.keys, "*")), refused(partial(client.scan, 0))]
            checks += [refused(client.randomkey), refused(client.flushdb)]
            checks += [refused(partial(client.config_get, "*")), refused(client.acl_list)]
            client.close()
        figure("worker ACL user: cache/session/keyspace operations refused", sum(checks), of=len(checks))
        assert all(checks), checks
        assert cache.get("kernelindex:registry-generation") == 1  # untouched

    def test_it_reaches_the_broker_keys_a_gpu_worker_needs(self, gpu_user):
        client = as_user(gpu_user["url"])
        queue, default = broker_key("gpu.cpu"), broker_key("default")
        broker_clear()  # no message an earlier test left in the queue comes out before the probe
        try:
            client.lpush(queue, b"probe")
            assert client.rpop(queue) == b"probe"
            # The default queue is write-only: a worker hands in reports, never reads or takes tasks
            # (its length, metadata only, Redis lets it see).
            client.lpush(default, b"probe")
            assert refused(partial(client.rpop, default))
            assert refused(partial(client.lrange, default, 0, -1))
        finally:
            client.close()
            admin = redis.Redis.from_url(settings.CELERY_BROKER_URL)
            admin.lrem(default, 0, b"probe")
            admin.close()
        other = as_user(gpu_user["url"])
        assert refused(lambda: other.lpush(broker_key("gpu.nvidia-h200"), b"x"))  # another model's queue
        other.close()


def gpu_worker_env(tmp_path: Path, broker_url: str, key_file: str, name: str) -> dict:
    """All a GPU worker is given: scripts/prod.py's variables, and the test worker's short timings."""
    base = {k: os.environ[k] for k in PROD.GPU_BASE_VARIABLES if k in os.environ}
    return {
        **base,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "kernelindex.settings",
        "KERNELINDEX_ROLE": "gpu-worker",
        "DEBUG": "0",
        "KERNELINDEX_VAR_DIR": str(tmp_path / "gpu-var"),
        "CELERY_BROKER_URL": broker_url,
        **({"CELERY_BROKER_KEY_PREFIX": broker_prefix()} if broker_prefix() else {}),
        "JOB_VERIFY_KEY": job_verify_key_text(),
        "WORKER_NAME": name,
        "WORKER_KEY_FILE": key_file,
        **WORKER_ENV,
    }


class QueueWorker(Worker):
    def __init__(self, log_dir: Path, queue: str, env: dict | None = None, **extra):
        super().__init__(log_dir, **extra)
        self.queue = queue
        if env is not None:
            self.env = env

    def command(self) -> list[str]:
        command = super().command()
        command[command.index("-Q") + 1] = self.queue
        return command


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
class TestSplitWorkers:
    def test_a_gpu_worker_without_database_takes_a_rerun_to_reproduced_and_forgeries_change_nothing(
        self, tmp_path, gpu_user
    ):
        csv_import(tmp_path / "runs.csv", small_cpu_rows(2))
        runs = list(BenchmarkRun.objects.order_by("pk"))
        key_file = str(settings.WORKER_KEY_FILE)
        worker_key_for_tests()  # the worker's key, registered for gpu.cpu
        env = gpu_worker_env(tmp_path, gpu_user["url"], key_file, TEST_WORKER)
        assert not {"DATABASE_URL", "CACHE_URL", "SECRET_KEY", "JOB_SIGNING_KEY"} & set(env)

        broker_clear()
        central = QueueWorker(tmp_path, "default").start()
        gpu = None
        try:
            gpu = QueueWorker(tmp_path, "gpu.cpu", env=env).start(timeout=120)
            job = rerun_request(run=runs[0])
            requested = time.monotonic()
            central.wait_for(lambda: _finished(job), 120, f"job {job.pk} to finish", interval=0.2)
            figure("split workers: rerun requested to recorded (s)", round(time.monotonic() - requested, 1))
            assert (job.state, job.verdict, job.worker_host) == (JobState.SUCCEEDED, "agrees", TEST_WORKER), (
                job.error + gpu.log()[-3000:]
            )
            runs[0].refresh_from_db()
            assert runs[0].evidence_level == "reproduced"
            assert "OperationalError" not in gpu.log() and "ImproperlyConfigured" not in gpu.log()

            # The attack of finding 2, with the GPU worker's own broker credentials.
            gpu.stop()
            target = rerun_request(run=runs[1])
            forger = celery_app_for(gpu_user["url"])
            result = harness_result(0.1, gpu_slug="cpu")
            forger.send_task("registry.job_record", args=[target.pk, "0" * 32, result], queue="default")
            pem, _ = private_key_generate()
            stranger = tmp_path / "stranger.key"
            stranger.write_bytes(pem)
            body = f'{{"at": 0, "job": {target.pk}, "kind": "result", "lease": "", "result": {{}}, "worker": "{TEST_WORKER}"}}'
            forger.send_task(
                "registry.job_report", args=[{"body": body, "signature": "AAAA"}], queue="default"
            )
            central.wait_for(
                lambda: "An unsigned result was refused" in central.log()
                and "Result refused" in central.log(),
                60,
                "the forgeries to be refused",
            )
            forger.close()
        finally:
            if gpu is not None:
                gpu.stop()
            central.stop()
            broker_clear()
        target.refresh_from_db()
        runs[1].refresh_from_db()
        assert (target.state, target.lease, target.median) == (JobState.QUEUED, "", None)
        assert runs[1].evidence_level == "reported"
        assert "An unsigned result was refused" in central.log()


def _finished(job) -> bool:
    job.refresh_from_db()
    return job.state in (JobState.SUCCEEDED, JobState.DIVERGED, JobState.FAILED)
