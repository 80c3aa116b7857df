from django.apps import AppConfig


class AttestationsConfig(AppConfig):
    name = "attestations"
    verbose_name = "Attestations and issue reports"
