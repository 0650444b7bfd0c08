"""One ``hub.audit`` line per sign-in, success or refusal, whichever way it came (password, LDAP, OpenID Connect,
the device grant): Django's ``user_logged_in`` / ``user_login_failed`` signals, and ``refused`` for the
refusals that never reach ``authenticate`` (a callback with a wrong state or ID token)."""

from __future__ import annotations

import logging

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.http import HttpRequest

audit = logging.getLogger("hub.audit")

METHODS = {"hub.accounts.backends.ThrottledModelBackend": "password", "hub.accounts.ldap.HubLDAPBackend": "ldap",
           "hub.accounts.oidc.OIDCBackend": "oidc"}


def address(request: HttpRequest | None) -> str:
    return request.META.get("REMOTE_ADDR", "?") if request is not None else "-"


def signed_in(sender, request, user, **kwargs) -> None:
    backend = getattr(user, "backend", None) or (request.session.get(BACKEND_SESSION_KEY) if request else None)
    method = METHODS.get(backend or "", backend or "?")
    audit.info("sign-in ok: %s by %s from %s", user.username, method, address(request))


def login_failed(sender, credentials, request=None, **kwargs) -> None:
    audit.warning("sign-in refused: %s by %s from %s (wrong credentials)", credentials.get("username", "?"),
                  "password/ldap", address(request))


def refused(request: HttpRequest | None, method: str, code: str, who: str = "?") -> None:
    """A sign-in refused before any person was known (``code``: the error code it was answered with)."""
    audit.warning("sign-in refused: %s by %s from %s (%s)", who, method, address(request), code)


def connect() -> None:
    user_logged_in.connect(signed_in, dispatch_uid="hub.audit.signed_in")
    user_login_failed.connect(login_failed, dispatch_uid="hub.audit.login_failed")
