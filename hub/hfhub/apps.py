from django.apps import AppConfig


class HfHubConfig(AppConfig):
    name = "hub.hfhub"
    label = "hfhub"
    verbose_name = "Hugging Face Hub protocol"
