"""Every change of registry state goes through a function in this package, in one transaction.

imports: the Liger importer and comparison-group ranks. reruns: controlled rerun and measure jobs.
"""

from registry.services.imports import (  # noqa: F401
    BUNDLED_LIGER_CSV,
    ImportRejected,
    ImportSummary,
    bundled_data_load,
    groups_rerank,
    liger_import,
)
from registry.services.reruns import (  # noqa: F401
    JobRefused,
    job_cancel,
    job_claim,
    job_fail,
    job_heartbeat,
    job_message,
    job_message_check,
    job_result_sent,
    job_send,
    jobs_reconcile,
    measure_request,
    rerun_record_result,
    rerun_request,
)
