from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "hub.accounts"
    label = "accounts"

    def ready(self) -> None:
        from hub.accounts import (
            audit,
            schema,  # noqa: F401 - registers the OpenAPI auth extension
        )

        audit.connect()
