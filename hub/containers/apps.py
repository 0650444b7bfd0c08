from django.apps import AppConfig


class ContainersConfig(AppConfig):
    name = "hub.containers"
    label = "containers"
