from django.apps import AppConfig


class ToySourceConfig(AppConfig):
    name = "tests.sources.toy"
    label = "source_toy"
    verbose_name = "Source: toy"
