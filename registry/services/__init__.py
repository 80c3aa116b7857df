"""Every change of registry state goes through a function in this package, in one transaction.

imports: the run writer every source's import services share, and comparison-group ranks;
changes: the steps between a series' consecutive values; run_keys: a run's sort and panel keys.
Each source's own import services live in its folder (`registry.sources.<name>.services`), and
the controlled-run pipeline's in `registry.reruns.services`.
"""

from registry.services.imports import (  # noqa: F401
    ImportRejected,
    ImportSummary,
    groups_rerank,
)
