from django.apps import AppConfig


class RerunsConfig(AppConfig):
    """The controlled-run pipeline, an app of its own inside the registry package. Its label is
    `reruns`; its models keep the tables they had in the registry app."""

    name = "registry.reruns"
    label = "reruns"
    verbose_name = "Controlled runs"
