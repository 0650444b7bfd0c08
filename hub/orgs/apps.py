from django.apps import AppConfig


class OrgsConfig(AppConfig):
    name = "hub.orgs"
    label = "orgs"
