"""Who asks: a request's credentials, and the registry's short-lived tokens.

A client first gets a ``401`` with ``WWW-Authenticate: Bearer realm=…/v2/token,service=…,scope=…``; it then asks
the token endpoint, sending the hub API token as the Basic password (any user name) or as a Bearer token, and gets
a signed registry token for the scopes it asked for (push only with a write token). The registry also takes a hub
API token directly as ``Bearer hpcf_…`` or as the Basic password (the hub's own workers)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.http import HttpRequest

from hub.accounts.models import TOKEN_PREFIX, ApiToken, hash_token
from hub.oci.errors import OciError

SALT = "hub.oci.token"
ACTIONS = ("pull", "push")


@dataclass
class Access:
    """The asker: ``user`` (None: anonymous) and what its credentials allow. ``scopes`` is None for a hub token
    (any repository; push only if it is a write token), else the registry token's ``{repository: actions}``."""

    user: object | None = None
    write: bool = False
    scopes: dict[str, set[str]] | None = field(default=None)
    sent: bool = False  # whether the request carried credentials at all
    token_id: int | None = None  # the hub token shown (its limit and its revocation reach its registry tokens)

    def allows(self, repository: str, action: str) -> bool:
        """Whether the credentials (not yet the repository's rules) allow ``action`` on ``repository``."""
        if action == "push" and not self.write:
            return False
        if self.scopes is None:
            return True
        return action in self.scopes.get(repository, set())


def parse_scopes(values: list[str]) -> dict[str, set[str]]:
    """``repository:NAME:pull,push`` scopes (several per value, space-separated) as ``{NAME: actions}``; other
    resource types (``registry:catalog:*``) are ignored, as the token specification allows."""
    wanted: dict[str, set[str]] = {}
    for value in values:
        for scope in value.split():
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            wanted.setdefault(name, set()).update(a for a in actions.split(",") if a in ACTIONS or a == "*")
    return {name: ({"pull", "push"} if "*" in acts else acts) for name, acts in wanted.items()}


def issue(access: Access, scopes: dict[str, set[str]]) -> str:
    """A registry token for ``access.user`` with ``scopes`` (push kept only for a write credential)."""
    granted = {name: sorted(a for a in actions if a == "pull" or access.write) for name, actions in scopes.items()}
    user = getattr(access.user, "pk", None)
    return signing.dumps({"u": user, "w": access.write, "s": granted, "t": access.token_id}, salt=SALT,
                         compress=True)


def _live(token: ApiToken | None) -> ApiToken:
    """``token`` if it is usable, its user carrying it (``hub_token``: the read rule and roles apply its limit, as
    the API's authentication does); else ``UNAUTHORIZED``."""
    if token is None or token.revoked is not None or not token.user.is_active or token.expired:
        raise OciError("UNAUTHORIZED", "This hub token is unknown, revoked or expired; create a new one on your "
                                       "account page.")
    token.user.hub_token = token
    return token


def _hub_token(raw: str) -> Access:
    token = _live(ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first())
    return Access(user=token.user, write=token.can_write, sent=True, token_id=token.pk)


def _registry_token(raw: str) -> Access:
    try:
        data = signing.loads(raw, salt=SALT, max_age=settings.HUB_OCI_TOKEN_SECONDS)
    except signing.SignatureExpired:
        raise OciError("UNAUTHORIZED", "The registry token expired; the client asks the token endpoint again.")
    except signing.BadSignature:
        raise OciError("UNAUTHORIZED", "The bearer token is neither a registry token of this hub nor a hub token.")
    user = None
    if data.get("t") is not None:  # made from a hub token: that token's person, limit and state
        token = _live(ApiToken.objects.select_related("user").filter(pk=data["t"], user_id=data.get("u")).first())
        user = token.user
    elif data.get("u") is not None:
        user = get_user_model().objects.filter(pk=data["u"], is_active=True).first()
        if user is None:
            raise OciError("UNAUTHORIZED", "The registry token's account is disabled or gone.")
    return Access(user=user, write=bool(data.get("w")), scopes={k: set(v) for k, v in data.get("s", {}).items()},
                  sent=True, token_id=data.get("t"))


def credentials(request: HttpRequest, *, registry_tokens: bool = True, authorization: str | None = None) -> Access:
    """The request's ``Access`` (anonymous when it sends no Authorization), or ``UNAUTHORIZED``; ``authorization``
    stands for the header (the token endpoint's password grant)."""
    header = (request.headers.get("Authorization", "") if authorization is None else authorization).strip()
    if not header:
        return Access()
    kind, _, value = header.partition(" ")
    value = value.strip()
    if kind.lower() == "bearer" and value:
        if value.startswith(TOKEN_PREFIX):
            return _hub_token(value)
        if registry_tokens:
            return _registry_token(value)
    if kind.lower() == "basic" and value:
        try:
            _, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise OciError("UNAUTHORIZED", "The Basic credentials are not base64 of 'user:token'.")
        if password.startswith(TOKEN_PREFIX):
            return _hub_token(password)
        raise OciError("UNAUTHORIZED", "Send a hub API token as the password (any user name): podman login "
                                       "--username me --password-stdin, the token on standard input.")
    raise OciError("UNAUTHORIZED", "Authorization must be 'Bearer <token>' or 'Basic <user:hub token>'.")

