from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "hub.generation"
    label = "generation"

    def ready(self) -> None:
        from hub.generation import services
        from hub.registry.signals import version_published

        version_published.connect(services.on_version_published, dispatch_uid="generation.auto_build")
