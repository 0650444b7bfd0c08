"""The person behind a site identity: made at the first sign-in from the provider's claims (username, name,
e-mail, ORCID), updated at every later one, and found again by (issuer, subject), never by username."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from hub.accounts.models import ExternalIdentity
from hub.errors import HubError

_ORCID = re.compile(r"(?:https?://orcid\.org/)?(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def orcid_of(value: Any) -> str:
    """An ORCID iD as ``0000-0002-1825-0097`` from a bare iD or its https://orcid.org/ URL; '' otherwise."""
    found = _ORCID.match(str(value or "").strip())
    return found.group(1) if found else ""


def _free_username(wanted: str) -> str:
    """``wanted`` made a hub name (letters, digits, ``_.-``), with ``-2``, ``-3``... when another person has it:
    a new identity never takes over an account it was not linked to."""
    base = _NOT_NAME.sub("-", wanted).strip("-.")[:140] or "user"
    users = get_user_model().objects
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


@transaction.atomic
def person_for(issuer: str, subject: str, *, username: str, email: str = "", first_name: str = "",
               last_name: str = "", orcid: str = ""):
    """The person with this identity, made or updated from what the provider says now."""
    identity = ExternalIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity is None:
        user = get_user_model()(username=_free_username(username or subject))
        user.set_unusable_password()
        identity = ExternalIdentity(issuer=issuer, subject=subject)
    else:
        user = identity.user
        if not user.is_active:
            raise HubError("signin_refused", f"The hub account {user.username} is disabled; ask the hub's "
                                             f"administrators ({settings.HUB_ADMIN_EMAIL}).")
    user.email, user.first_name, user.last_name = email[:254], first_name[:150], last_name[:150]
    user.save()
    identity.user, identity.last_signed_in = user, timezone.now()
    identity.orcid = orcid_of(orcid) or identity.orcid
    identity.save()
    return user


def from_claims(issuer: str, claims: dict[str, Any]):
    """``person_for`` with the claim names the site configured (``HUB_OIDC_CLAIMS``)."""
    names = settings.HUB_OIDC_CLAIMS

    def claim(key: str) -> str:
        value = claims.get(names[key])
        return str(value) if isinstance(value, (str, int)) else ""

    return person_for(issuer, str(claims["sub"]), username=claim("username"), email=claim("email"),
                      first_name=claim("given_name"), last_name=claim("family_name"), orcid=claim("orcid"))


def groups_of(claims: dict[str, Any]) -> list[str]:
    """The group claim's values (a list of strings, or one string)."""
    value = claims.get(settings.HUB_OIDC_CLAIMS["groups"])
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value if isinstance(item, str)] if isinstance(value, list) else []
