"""KernelIndex benchmark suite: `python bench/run.py [--quick]` (see docs/performance.md)."""
