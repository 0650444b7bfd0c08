from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "hub.gateway"
    label = "gateway"
    verbose_name = "inference and job gateway"

    def ready(self) -> None:
        from hub.gateway import memory

        memory.connect()
