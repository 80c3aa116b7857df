"""Controlled runs: requesting rerun and measure jobs, claiming them on a GPU worker, recording
their results, one module per concern:

- `request`: rerun_request, measure_request, ceilings_request, job_cancel, sending a job's message;
- `signing`: the signed job message a worker checks before it runs anything;
- `worker`: claims, heartbeats, the result-sent mark, failures;
- `record`: rerun_record_result, the evidence rule, and rerun_rejudge;
- `measured_run`: a controlled run as a registry record (the recorder and the loader share it);
- `reconcile`: jobs_reconcile;
- `ceilings`: a GPU model's measured ceilings, from a ceilings job or a shipped file.

The evidence rule lives in one module, `record` (`rerun_record_result`, `rerun_rejudge`).
Requesting, claiming, heartbeats, failures, divergence and reconciliation never touch the level.
"""

from registry.reruns.services.measured_run import (
    CONTROLLED_SOURCE,
    controlled_source,
    measured_run_create,
    measured_run_from_job,
)
from registry.reruns.services.reconcile import jobs_reconcile
from registry.reruns.services.record import rerun_record_result, rerun_rejudge
from registry.reruns.services.request import (
    JobRefused,
    MeasureRequest,
    ceilings_request,
    job_cancel,
    job_send,
    measure_request,
    rerun_request,
)
from registry.reruns.services.signing import job_message, job_message_check
from registry.reruns.services.worker import (
    CPU_SLUG,
    Claim,
    bounded_log,
    job_claim,
    job_fail,
    job_heartbeat,
    job_result_sent,
    job_spec,
)

__all__ = [
    "CONTROLLED_SOURCE",
    "CPU_SLUG",
    "Claim",
    "JobRefused",
    "MeasureRequest",
    "bounded_log",
    "ceilings_request",
    "controlled_source",
    "job_cancel",
    "job_claim",
    "job_fail",
    "job_heartbeat",
    "job_message",
    "job_message_check",
    "job_result_sent",
    "job_send",
    "job_spec",
    "jobs_reconcile",
    "measure_request",
    "measured_run_create",
    "measured_run_from_job",
    "rerun_record_result",
    "rerun_rejudge",
    "rerun_request",
]
