from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "hub.registry"
    label = "registry"
