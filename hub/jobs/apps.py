from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "hub.jobs"
    label = "jobs"
