"""``python manage.py hub_token USERNAME [--create] [--scope read|write]``: print a new API token."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.models import ApiToken


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (with --create, make the user if missing)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user if it does not exist")
        parser.add_argument("--scope", choices=["read", "write"], default="read")
        parser.add_argument("--name", default="", help="a label to recognise the token by")

    def handle(self, username: str, create: bool, scope: str, name: str, **options) -> None:
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r}; add --create to make one")
            user = User.objects.create_user(username=username)
        _, raw = ApiToken.issue(user, scope=scope, name=name or "hub_token")
        self.stdout.write(raw)
