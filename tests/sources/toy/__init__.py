"""A third source that exists only in the tests: a folder of the plug-in shape, registered through
INSTALLED_APPS, with no line of registry code touched (docs/sources.md)."""

from pathlib import Path

from registry.sources import SourcePlugin

HERE = Path(__file__).resolve().parent

SOURCE = SourcePlugin(
    slug="toy",
    name="Toy benchmarks",
    package=__name__,
    bundled_loader="tests.sources.toy.importer:bundled_load",
    licence=HERE / "LICENSE",
    provenance=HERE / "SOURCE.md",
    comparability="a toy's made-up figures",
    baseline_provider="slow",
    kernel_search="tests.sources.toy.importer:kernels_matching",
)
