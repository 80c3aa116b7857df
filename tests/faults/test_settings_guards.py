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
