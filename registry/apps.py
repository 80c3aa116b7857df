from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Registry"

    def ready(self):
        from registry.cache import receivers_connect

        receivers_connect(self)
