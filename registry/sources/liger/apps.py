from django.apps import AppConfig


class LigerSourceConfig(AppConfig):
    """Liger-Kernel's source as an app of its own, so that its management commands and Celery
    tasks are found in its folder. It has no models: its rows live in the registry's tables."""

    name = "registry.sources.liger"
    label = "source_liger"
    verbose_name = "Source: Liger-Kernel"
