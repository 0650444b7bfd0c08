from django.apps import AppConfig


class MetadataConfig(AppConfig):
    name = "hub.metadata"
    label = "metadata"
