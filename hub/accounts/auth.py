"""``Authorization: Bearer <token>`` authentication for the API."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, BasicAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from hub.accounts.models import ApiToken, hash_token
from hub.errors import HubError

_LAST_USED_GRANULARITY = timedelta(minutes=5)


class PasswordAuthentication(BasicAuthentication):
    """HTTP Basic (a username and password: only for managing tokens), whose refusal says what was wrong in the
    hub's terms: ``invalid_credentials``, not DRF's ``invalid_token`` for a request that sent no token."""

    def authenticate_credentials(self, userid, password, request=None):
        try:
            return super().authenticate_credentials(userid, password, request)
        except AuthenticationFailed:
            raise HubError("invalid_credentials", "The username or password is wrong, or the account is disabled.")


class BearerTokenAuthentication(BaseAuthentication):
    """Looks the token up by its sha256; ``request.auth`` is the ApiToken row."""

    def authenticate(self, request: Request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        if len(header) != 2:
            raise HubError("invalid_token", "The Authorization header must be 'Bearer <token>'.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise HubError("invalid_token", "The token contains characters a token never has.")
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=hash_token(raw), revoked__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise HubError("invalid_token", "This token is unknown or was revoked; create a new one.")
        if token.expired:
            raise HubError("token_expired", f"This token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; "
                                            "create a new one on your account page, or run 'hpcfair login' again.")
        now = timezone.now()
        if token.last_used is None or now - token.last_used > _LAST_USED_GRANULARITY:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        token.user.hub_token = token  # readable_by and role checks apply the token's limit (hub.registry.rule)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def request_user(request):
    """The user of a plain Django view: a valid bearer token's user, else the session's user."""
    try:
        result = BearerTokenAuthentication().authenticate(request)
    except HubError:  # a bad token reads nothing private, as in the API
        return AnonymousUser()
    return result[0] if result else request.user
