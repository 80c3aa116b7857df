"""Every change of registry state goes through a function in this package, in one transaction.

imports: the Liger importer and comparison-group ranks; history: the data file's history, and
bundled_data_load (history and release together). The controlled-run pipeline's services are
in `registry.reruns.services`.
"""

from registry.services.history import bundled_data_load  # noqa: F401
from registry.services.imports import (  # noqa: F401
    BUNDLED_LIGER_CSV,
    ImportRejected,
    ImportSummary,
    groups_rerank,
    liger_import,
)
