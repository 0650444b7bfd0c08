from django.apps import AppConfig


class FinetuneConfig(AppConfig):
    name = "hub.finetune"
    label = "finetune"
