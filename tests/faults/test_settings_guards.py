"""The settings that the fault tests depend on are set deliberately and refuse bad values at start:
a visibility timeout shorter than the longest job, a job signing key too short to be a key."""

import subprocess

from tests.processes import child_env, manage

SHOW = (
    "from django.conf import settings as s; "
    "print(s.CELERY_BROKER_TRANSPORT_OPTIONS, s.JOB_RECONCILE_INTERVAL, s.JOB_STALE_AFTER, "
    "s.CELERY_BROKER_CONNECTION_MAX_RETRIES, len(s.JOB_SIGNING_KEY))"
)


def start(**env) -> subprocess.CompletedProcess:
    # No broker key prefix (tests/settings.py gives one to each xdist worker): the defaults shown.
    env.setdefault("CELERY_BROKER_KEY_PREFIX", "")
    return subprocess.run(manage("shell", "-c", SHOW), env=child_env(**env), capture_output=True, text=True)


class TestBrokerSettings:
    def test_redis_gets_the_documented_visibility_timeout_and_restore_scan(self):
        result = start(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
        assert result.returncode == 0, result.stderr
        assert (
            "{'visibility_timeout': 7200, 'unacked_restore_interval': 10, 'unacked_restore_throttle': 1} "
            "60.0 120.0 None 64"
        ) in result.stdout

    def test_a_visibility_timeout_shorter_than_the_longest_job_refuses_to_start(self):
        result = start(
            CELERY_BROKER_URL="redis://127.0.0.1:1/0",
            CELERY_VISIBILITY_TIMEOUT="600",
            JOB_HARNESS_TIMEOUT="1800",
        )
        assert result.returncode != 0
        assert "CELERY_VISIBILITY_TIMEOUT must be longer than JOB_HARNESS_TIMEOUT" in result.stderr


class TestSigningKey:
    def test_a_short_signing_key_refuses_to_start(self):
        result = start(JOB_SIGNING_KEY="too-short")
        assert result.returncode != 0
        assert "JOB_SIGNING_KEY is invalid" in result.stderr

    def test_a_signing_key_of_its_own_is_used_as_given(self):
        result = start(JOB_SIGNING_KEY="k" * 40)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith(" 40")


class TestGpuWorkerRole:
    """A GPU worker (KERNELINDEX_ROLE=gpu-worker) starts only without the web tier's credentials."""

    SHOW_ROLE = "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'], s.JOB_SIGNING_KEY == '')"

    def start_worker(self, **env):
        base = child_env(
            **{"KERNELINDEX_ROLE": "gpu-worker", "JOB_VERIFY_KEY": "A" * 43 + "=", "DEBUG": "0", **env}
        )
        for name in ("DATABASE_URL", "CACHE_URL", "SECRET_KEY", "JOB_SIGNING_KEY"):
            if name not in env:
                base.pop(name, None)
        return subprocess.run(manage("shell", "-c", self.SHOW_ROLE), env=base, capture_output=True, text=True)

    def test_it_starts_with_no_database_and_no_signing_key(self):
        result = self.start_worker()
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("django.db.backends.dummy True")

    def test_any_of_the_web_tiers_credentials_refuses_to_start(self):
        for name, value in (
            ("DATABASE_URL", "postgres://kernelindex:pw@127.0.0.1:5432/kernelindex"),
            ("CACHE_URL", "redis://127.0.0.1:6379/1"),
            ("SECRET_KEY", "s" * 50),
        ):
            result = self.start_worker(**{name: value})
            assert result.returncode != 0
            assert f"{name} must not be given to a GPU worker" in result.stderr
        result = self.start_worker(JOB_SIGNING_KEY="k" * 40)
        assert "JOB_SIGNING_KEY must not be given to a GPU worker" in result.stderr

    def test_it_needs_the_job_verify_key(self):
        result = self.start_worker(JOB_VERIFY_KEY="")
        assert result.returncode != 0
        assert "JOB_VERIFY_KEY is required on a GPU worker" in result.stderr
