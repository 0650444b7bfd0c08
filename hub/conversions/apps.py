from django.apps import AppConfig


class ConversionsConfig(AppConfig):
    name = "hub.conversions"
    label = "conversions"

    def ready(self) -> None:
        from hub.conversions import services
        from hub.registry.signals import version_published

        version_published.connect(services.on_version_published, dispatch_uid="conversions.auto_convert")
