from django.apps import AppConfig


class AttestationsConfig(AppConfig):
    name = "attestations"
    verbose_name = "Attestations and issue reports"

    def ready(self):
        # Approved attestations show on run pages: their saves make stored pages stale.
        from registry.cache import receivers_connect

        receivers_connect(self)
