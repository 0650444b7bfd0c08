from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "hub.web"
    label = "web"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        from hub.web.human import refuse_reserved

        pre_save.connect(refuse_reserved, sender=get_user_model(), dispatch_uid="web-reserved-owners")
