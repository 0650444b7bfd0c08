from django.apps import AppConfig


class OciConfig(AppConfig):
    name = "hub.oci"
    label = "oci"
    verbose_name = "OCI Distribution registry"
