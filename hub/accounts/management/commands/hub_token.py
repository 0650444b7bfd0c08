"""``python manage.py hub_token USERNAME [--create] [--scope read|infer|publish|admin|write] [--name NAME] [--days N]``:
print a new API token (for an organization: a service token limited to it), which expires as the site's tokens do
(``HUB_TOKEN_DEFAULT_DAYS``) unless ``--days`` says otherwise.

With ``--name``, the new token replaces the user's earlier tokens of that name (they are revoked), so a
script that runs the command at every start keeps one token, not a pile (issue 41, point 7)."""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hub.accounts import expiry
from hub.accounts.models import ApiToken
from hub.errors import HubError

audit = logging.getLogger("hub.audit")


class Command(BaseCommand):
    help = ("Print a new API token for USERNAME (with --create, make the user if missing; with --name, it "
            "replaces the user's earlier tokens of that name).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user if it does not exist")
        parser.add_argument("--scope", choices=ApiToken.Scope.values, default="read",
                            help="read < infer < publish < admin (write: as admin, as before)")
        parser.add_argument("--name", default="",
                            help="a label to recognise the token by; earlier tokens of this name are revoked")
        parser.add_argument("--days", type=int, default=None,
                            help="days the token lives (default: HUB_TOKEN_DEFAULT_DAYS; at most HUB_TOKEN_MAX_DAYS)")

    def handle(self, username: str, create: bool, scope: str, name: str, days: int | None = None,
               **options) -> None:
        try:
            expires_at = expiry.expires_at(days)
        except HubError as exc:
            raise CommandError(exc.message) from None
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r}; add --create to make one")
            user = User.objects.create_user(username=username)
        replaced = 0
        if name:
            earlier = ApiToken.objects.filter(user=user, name=name, revoked__isnull=True).values_list("pk", flat=True)
            replaced = sum(ApiToken.revoke(user, pk) for pk in list(earlier))
        org = getattr(user, "organization", None)  # an organization: a service token limited to it
        token, raw = ApiToken.issue(user, scope=scope, name=name or "hub_token", org=org, expires_at=expires_at)
        audit.info("token %s: %s (%s%s) created by manage.py hub_token", user.username, token.prefix, token.scope,
                   f", {token.limit}" if token.limited else "")
        if replaced:
            self.stderr.write(f"revoked {replaced} earlier token{'s' if replaced > 1 else ''} named {name!r}")
        self.stdout.write(raw)
