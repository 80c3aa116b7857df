from django.apps import AppConfig


class KernelBenchSourceConfig(AppConfig):
    """KernelBench's source as an app of its own, so that its management commands are found in
    its folder. It has no models: its rows live in the registry's tables and the rerun app's."""

    name = "registry.sources.kernelbench"
    label = "source_kernelbench"
    verbose_name = "Source: KernelBench"
