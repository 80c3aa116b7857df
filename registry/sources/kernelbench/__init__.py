"""KernelBench's reference timings (ScalingIntelligence/KernelBench, MIT)."""

from pathlib import Path

from registry.sources import SourcePlugin

DATA_DIR = Path(__file__).resolve().parent / "data"

SOURCE = SourcePlugin(
    slug="kernelbench",
    name="KernelBench reference timings",
    package=__name__,
    bundled_loader="registry.sources.kernelbench.services:bundled_load",
    licence=DATA_DIR / "LICENSE",
    provenance=DATA_DIR / "SOURCE.md",
    comparability="a mean over num_trials calls each timed with CUDA events, 3 warm-up calls, "
    "no L2 flush, rounded to three significant digits, of a KernelBench problem file's PyTorch "
    "reference",
    baseline_provider="eager",
    kernel_search="registry.sources.kernelbench.search:kernels_matching",
    work_counter="registry.sources.kernelbench.work:count",
)
