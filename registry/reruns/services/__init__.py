"""Controlled runs: requesting rerun and measure jobs, claiming them on a GPU worker, recording
their results, one module per concern:

- `request`: rerun_request, measure_request, ceilings_request, job_cancel, sending a job's message;
- `signing`: Ed25519 signatures: the job message a worker checks before it runs anything, the
  grant of a lease, and a worker's own signed reports;
- `worker_keys`: GPU worker keys, and the central worker's checks of a worker's claim, heartbeat
  and result before anything is written;
- `worker`: claims, heartbeats, the result-sent mark, failures;
- `record`: rerun_record_result, the evidence rule, and rerun_rejudge;
- `measured_run`: a controlled run as a registry record (the recorder and the loader share it);
- `reconcile`: jobs_reconcile;
- `measured_ceilings`: a GPU model's measured ceilings as rows, from a ceilings job or a shipped
  file (the measurement itself is `registry.reruns.ceilings`, run on the GPU host).

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
from registry.reruns.services.record import rerun_record_result, rerun_rejudge, run_level_settle
from registry.reruns.services.request import (
    JobRefused,
    MeasureRequest,
    ceilings_request,
    job_cancel,
    job_send,
    measure_request,
    rerun_request,
)
from registry.reruns.services.signing import (
    SignatureRefused,
    grant_check,
    job_message,
    job_message_check,
    worker_report,
)
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
from registry.reruns.services.worker_keys import (
    worker_claim,
    worker_heartbeat,
    worker_key_register,
    worker_key_revoke,
    worker_result_record,
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
    "run_level_settle",
    "measured_run_from_job",
    "rerun_record_result",
    "rerun_rejudge",
    "rerun_request",
    "SignatureRefused",
    "grant_check",
    "worker_claim",
    "worker_heartbeat",
    "worker_key_register",
    "worker_key_revoke",
    "worker_report",
    "worker_result_record",
]
