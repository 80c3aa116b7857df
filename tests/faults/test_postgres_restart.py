"""Item 4: PostgreSQL restarted while requests and a rerun job run.

The site runs as deployed (gunicorn, production settings, CONN_MAX_AGE=60 with
CONN_HEALTH_CHECKS) on a PostgreSQL cluster of the test's own (initdb in a temporary folder, on
its own port), so that restarting it touches nobody else's database; Redis is one of the test's
own too. Counted: the 5xx answers and how long the site took to answer again. The job: its
heartbeat fails during the restart and reconnects; the result is recorded once; nothing is left
running or queued past the reconciler's deadline. Then a job is delivered while PostgreSQL is
down: its claim fails with OperationalError, the task retries with backoff, and completes once
PostgreSQL is back."""

import threading
import time

import psycopg
import pytest

from bench.servers import PostgresServer, RedisServer, free_port, wait_until
from bench.stack import Stack, data_csv
from tests.faults.support import figure
from tests.reruns.worker import broker_is_redis

pytestmark = [
    pytest.mark.worker,
    # Self-contained (its own PostgreSQL and Redis), so it runs once: in CI's PostgreSQL + Redis pass.
    pytest.mark.skipif(
        not broker_is_redis(), reason="runs in the Redis pass (CELERY_BROKER_URL=redis://...)"
    ),
]
PAGES = ["/", "/kernels/geglu/", "/runs/1/", "/compare/1/2/", "/api/v1/runs/?page_size=20"]
DONE = ("succeeded", "diverged", "failed", "cancelled")
# The deadline: stale after JOB_STALE_AFTER (3 s), put back within JOB_RECONCILE_INTERVAL (2 s),
# plus the job itself (a cold harness: up to a minute on a busy machine).
DEADLINE_S = 120


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    reason = PostgresServer.available()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("pg-restart")
    postgres = PostgresServer(free_port(5439)).init().start()
    redis = RedisServer(folder / "redis", free_port(6395)).start()
    postgres.createdb("kernelindex")
    site = Stack(
        folder / "site", database_url=postgres.url("kernelindex"), broker_url=redis.url, port=free_port(8790)
    )
    try:
        site.prepare(data_csv(folder / "data.csv", bundled=False))
        site.start_web()
        site.start_worker()
        yield site, postgres
    finally:
        site.stop()
        redis.stop()
        postgres.remove()


def jobs(postgres: PostgresServer) -> dict[int, tuple]:
    """{job id: (state, attempts, started_at, finished_at)}, read straight from the cluster."""
    with psycopg.connect(postgres.url("kernelindex"), connect_timeout=3) as conn:
        rows = conn.execute(
            "SELECT id, state, attempts, started_at, finished_at FROM registry_rerunjob"
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


def job_state(postgres, job_id):
    try:
        return jobs(postgres).get(job_id, (None,))[0]
    except psycopg.OperationalError:
        return None


class Browsing:
    """Requests in a loop from one thread until stopped: (time, path, status) each; 0 = no answer."""

    def __init__(self, site: Stack):
        self.site, self.answers, self.stop_event = site, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        while not self.stop_event.is_set() and i < 100_000:
            path = PAGES[i % len(PAGES)]
            self.answers.append((time.time(), path, self.site.status(path, timeout=10)))
            i += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(timeout=30)


def test_requests_and_a_running_job_survive_a_postgresql_restart(stack):
    site, postgres = stack
    assert [site.status(page) for page in PAGES] == [200] * len(PAGES)
    site.manage("request_rerun", "1")
    job_id = max(jobs(postgres))
    wait_until(lambda: job_state(postgres, job_id) == "running", 90, "the job to start")

    with Browsing(site) as browsing:
        time.sleep(2)
        began = time.time()
        postgres.restart()
        back = time.time()
        time.sleep(5)
    wait_until(lambda: job_state(postgres, job_id) in DONE, DEADLINE_S, "the job to finish", interval=0.5)

    answers = browsing.answers
    failures = [(t, p, s) for t, p, s in answers if s != 200]
    after_back = [(t, s) for t, _, s in answers if t >= back]
    first_ok = next((t for t, s in after_back if s == 200), None)
    assert first_ok is not None, "the site never answered again"
    late = [(round(t - back, 2), s) for t, s in after_back if t >= first_ok and s != 200]
    assert late == [], f"errors after the site recovered (seconds after PostgreSQL was back, status): {late}"
    assert all(s in (500, 502, 503, 0) for _, _, s in failures), failures
    assert all(began - 5 <= t <= back + 1 for t, _, _ in failures), "errors outside the restart"
    state, attempts, _, finished_at = jobs(postgres)[job_id]
    assert state == "succeeded", site.log("worker")[-4000:]
    # The stack's JOB_STALE_AFTER is 3 s: a restart that outlasts it (seconds on a busy machine)
    # leaves the beats unanswered, so the reconciler presumes the attempt lost and grants one more,
    # by design. The lease makes either way record the result once: only the attempt that holds
    # it may write it, and the job's one result_run or verdict is that attempt's.
    assert attempts in (1, 2), attempts
    heartbeat_failed = "Heartbeat of job" in site.log("worker")
    assert heartbeat_failed or finished_at.timestamp() < back  # a job running across it lost a beat
    stuck = [j for j, (s, *_) in jobs(postgres).items() if s in ("queued", "running")]
    assert stuck == []
    figure(
        "item4.postgres_restart",
        {
            "requests": len(answers),
            "5xx": sum(1 for _, _, s in failures if s >= 500),
            "no_answer": sum(1 for _, _, s in failures if s == 0),
            "restart_s": round(back - began, 2),
            "site_recovered_s_after_restart_began": round(first_ok - began, 2),
            "site_recovered_s_after_postgres_back": round(max(first_ok - back, 0), 2),
            "job": state,
            "job_attempts": attempts,
            "heartbeat_failed_and_recovered": heartbeat_failed,
        },
    )


def test_a_job_delivered_while_postgresql_is_down_retries_and_completes(stack):
    site, postgres = stack
    site.stop("worker")
    site.manage("request_rerun", "1")  # the message waits in Redis
    job_id = max(jobs(postgres))
    postgres.stop()
    stopped = time.time()
    site.start_worker()
    wait_until(lambda: "OperationalError" in site.log("worker"), 60, "the claim to fail")
    postgres.start()
    started = time.time()
    wait_until(lambda: job_state(postgres, job_id) in DONE, DEADLINE_S, "the job to finish", interval=0.5)

    state, attempts, _, finished_at = jobs(postgres)[job_id]
    assert (state, attempts) == ("succeeded", 1)
    assert "Retry in" in site.log("worker")
    figure(
        "item4.job_delivered_while_postgres_down",
        {
            "postgres_down_s": round(started - stopped, 1),
            "finished_s_after_postgres_back": round(finished_at.timestamp() - started, 1),
            "attempts": attempts,
        },
    )
