"""Item 2: a job that runs longer than Redis's visibility timeout, with two workers on its queue.

Redis hands the still-unacknowledged message to the second worker while the first one runs the
job (here every 2 s, on purpose: the job takes about 4 s on a quiet machine, so Redis hands
it out again at least once; in production CELERY_VISIBILITY_TIMEOUT must outlast
JOB_HARNESS_TIMEOUT, which the settings check at start). The claim holds: the second worker
finds a live attempt and writes nothing, so exactly one execution claims, runs and records."""

import re

import pytest

from registry.reruns.models import JobState
from registry.reruns.services import rerun_request
from tests.faults.support import figure, levels_seen, needs_redis
from tests.faults.workers import FaultWorker, watch_until_finished

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_redis]
VISIBILITY_S = 2
SHORT_VISIBILITY = {
    "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_S),
    "CELERY_VISIBILITY_TIMEOUT_UNCHECKED": "1",
}


def test_two_workers_never_both_execute_a_job_longer_than_the_visibility_timeout(
    slow_cpu_run, clean_broker, tmp_path
):
    workers = [FaultWorker(tmp_path, **SHORT_VISIBILITY).start() for _ in range(2)]
    try:
        job = rerun_request(run=slow_cpu_run)
        levels = watch_until_finished(job, slow_cpu_run, timeout=180)
        duration = (job.finished_at - job.started_at).total_seconds()
        logs = [worker.log() for worker in workers]

        assert duration > VISIBILITY_S + 1  # longer than the visibility timeout and a restore scan
        assert job.state == JobState.SUCCEEDED, job.error
        redelivered = sum(len(re.findall(rf"Job {job.pk} is held by a live attempt", log)) for log in logs)
        assert redelivered >= 1  # Redis did hand it out again while it ran
        claims = [lease for worker in workers for lease in worker.claims(job.pk)]
        assert len(claims) == job.attempts == 1  # one execution, never two at once
        recorded = [outcome for worker in workers for outcome in worker.recorded()]
        assert recorded == ["succeeded"]
        assert levels_seen(levels) == ["reported", "reproduced"]
        figure(
            "item2.long_job.redeliveries_while_running",
            redelivered,
            job_seconds=round(duration, 1),
            visibility_timeout_s=VISIBILITY_S,
            executions=len(claims),
        )
    finally:
        for worker in workers:
            worker.stop()
