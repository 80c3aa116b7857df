"""Every change of registry state goes through a function in this package, in one transaction.

imports: the Liger importer and comparison-group ranks. The controlled-run pipeline's services are
in `registry.reruns.services`.
"""

from registry.services.imports import (  # noqa: F401
    BUNDLED_LIGER_CSV,
    ImportRejected,
    ImportSummary,
    bundled_data_load,
    groups_rerank,
    liger_import,
)
