"""Liger-Kernel's published benchmark data (linkedin/Liger-Kernel, BSD-2-Clause)."""

from pathlib import Path

from registry.sources import SourcePlugin

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED_CSV = DATA_DIR / "all_benchmark_data.csv"
BUNDLED_HISTORY = DATA_DIR / "history"

SOURCE = SourcePlugin(
    slug="liger-kernel",
    name="Liger-Kernel benchmarks",
    package=__name__,
    bundled_loader="registry.sources.liger.services:bundled_data_load",
    licence=DATA_DIR / "LICENSE",
    provenance=DATA_DIR / "SOURCE.md",
    comparability="a median (p20, p50, p80) from triton's do_bench over a 10 ms budget, each "
    "workload in Liger's own benchmark scripts",
    # The speed of light's formulas, one per kernel.
    work_counter="registry.sources.liger.work:work_of",
    work_kernels="registry.sources.liger.work:WORK",
    # The rerun app's jobs measure Liger's workloads, through Liger's benchmark scripts.
    measured_fields="registry.sources.liger.rerun_specs:measured_fields",
    rerun_targets_loader="registry.sources.liger.services:newest_data_load",
)
