"""The OAuth 2.0 device authorization grant (RFC 8628) with the hub as its authorization server, for
``hpcfair login`` on a login node without a browser: the CLI asks for a device code and a user code, the person
types the user code on ``/device`` (signed in there, by any of the site's ways) and approves, the CLI polls the
token endpoint and gets an expiring access token (an ``ApiToken``) and a refresh token.

Each refusal is the RFC's own error name (``authorization_pending``, ``slow_down``, ``expired_token``,
``access_denied``, ``invalid_grant``...), raised as a ``HubError`` of that code."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import ApiToken, DeviceAuthorization, RefreshToken, hash_token
from hub.errors import HubError

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels (no words), no look-alike digits (RFC 8628 6.1)
REFRESH_PREFIX = "hpcr_"
_POLL_SLACK = timedelta(milliseconds=500)  # a poll this much early is still on time (network jitter)
State = DeviceAuthorization.State


def _client(client_id: str) -> str:
    if client_id not in settings.HUB_DEVICE_CLIENT_IDS:
        raise HubError("invalid_client", f"Unknown client_id {client_id!r}; this hub's device clients are "
                                         f"{', '.join(settings.HUB_DEVICE_CLIENT_IDS)}.")
    return client_id


def _scope(scope: str) -> str:
    scope = scope.strip() or ApiToken.Scope.WRITE
    if scope not in ApiToken.Scope.values:
        raise HubError("invalid_scope", f"scope is one of {', '.join(ApiToken.Scope.values)}, not {scope!r}.")
    return scope


def normalize_user_code(text: str) -> str:
    """``bcdf ghjk``, ``BCDFGHJK`` and ``bcdf-ghjk`` are the same code: ``BCDF-GHJK``."""
    letters = "".join(ch for ch in text.upper() if ch.isalnum())
    return f"{letters[:4]}-{letters[4:]}" if len(letters) == 8 else letters


def start(client_id: str, scope: str = "") -> dict[str, Any]:
    """A new authorization: the device authorization response of RFC 8628 3.2."""
    client_id, scope = _client(client_id), _scope(scope)
    device_code = secrets.token_urlsafe(32)
    ttl = settings.HUB_DEVICE_CODE_TTL_S
    for _ in range(5):
        letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
        user_code = f"{letters[:4]}-{letters[4:]}"
        try:
            with transaction.atomic():
                DeviceAuthorization.objects.create(
                    device_code_hash=hash_token(device_code), user_code=user_code, client_id=client_id,
                    scope=scope, expires_at=timezone.now() + timedelta(seconds=ttl),
                    interval=settings.HUB_DEVICE_INTERVAL_S)
            break
        except IntegrityError:  # the user code is taken (expired rows are cleared below)
            continue
    else:
        raise HubError("conflict", "Could not find a free user code; try again.")
    DeviceAuthorization.objects.filter(expires_at__lt=timezone.now() - timedelta(days=1)).delete()
    page = settings.HUB_PUBLIC_URL + "/device"
    return {"device_code": device_code, "user_code": user_code, "verification_uri": page,
            "verification_uri_complete": f"{page}?user_code={user_code}", "expires_in": ttl,
            "interval": settings.HUB_DEVICE_INTERVAL_S}


def pending(user_code: str) -> DeviceAuthorization:
    """The authorization waiting for this user code, or ``not_found`` saying what to do."""
    row = DeviceAuthorization.objects.filter(user_code=normalize_user_code(user_code), state=State.PENDING,
                                             expires_at__gt=timezone.now()).first()
    if row is None:
        raise HubError("not_found", "No sign-in waits for this code: it is mistyped, was used already or has "
                                    "expired. Run 'hpcfair login' again for a new code.")
    return row


def decide(user_code: str, user, approve: bool, request=None) -> DeviceAuthorization:
    """The signed-in person approves (or denies) the device that shows ``user_code``."""
    with transaction.atomic():
        row = pending(user_code)
        row = DeviceAuthorization.objects.select_for_update().get(pk=row.pk)
        row.state, row.user = (State.APPROVED if approve else State.DENIED), user
        row.save(update_fields=["state", "user"])
    if approve:
        audit.audit.info("sign-in ok: %s by device grant (%s, %s) from %s", user.username, row.client_id,
                         row.scope, audit.address(request))
    else:
        audit.refused(request, f"device grant ({row.client_id})", "access_denied", user.username)
    return row


def _pair(user, scope: str, client_id: str) -> dict[str, Any]:
    """A new access token and refresh token: the token response of RFC 6749 5.1."""
    now = timezone.now()
    access_ttl = settings.HUB_DEVICE_ACCESS_TTL_S
    access, raw = ApiToken.issue(user, scope=scope, name=f"{client_id} (device login)",
                                 expires_at=now + timedelta(seconds=access_ttl))
    refresh_raw = REFRESH_PREFIX + secrets.token_urlsafe(32)
    days = settings.HUB_DEVICE_REFRESH_DAYS
    if settings.HUB_TOKEN_MAX_DAYS:
        days = min(days, settings.HUB_TOKEN_MAX_DAYS)
    RefreshToken.objects.create(user=user, key_hash=hash_token(refresh_raw), access=access, client_id=client_id,
                                scope=scope, expires_at=now + timedelta(days=days))
    return {"access_token": raw, "token_type": "Bearer", "expires_in": access_ttl, "refresh_token": refresh_raw,
            "scope": scope}


def exchange(device_code: str, client_id: str) -> dict[str, Any]:
    """The token endpoint's answer to a poll (RFC 8628 3.4, 3.5)."""
    client_id = _client(client_id)
    with transaction.atomic():  # the poll's time and interval are kept: the refusal is raised after commit
        row = (DeviceAuthorization.objects.select_for_update()
               .filter(device_code_hash=hash_token(device_code), client_id=client_id).first())
        refusal = _refusal(row)
        if refusal is None:
            row.state = State.USED
            row.save(update_fields=["state"])
            answer = _pair(row.user, row.scope, client_id)
    if refusal is not None:
        raise refusal
    audit.audit.info("device grant: tokens issued to %s for %s (%s)", row.user.username, client_id, row.scope)
    return answer


def _refusal(row: DeviceAuthorization | None) -> HubError | None:
    """Why this poll gets no tokens (None: it does); a pending row records the poll, and a poll sooner than
    the interval raises the interval by 5 s (RFC 8628 3.5: for this and every later request)."""
    if row is None:
        return HubError("invalid_grant", "This device code is unknown; run 'hpcfair login' again.")
    now = timezone.now()
    if row.state == State.USED:
        return HubError("invalid_grant", "This device code was exchanged already; run 'hpcfair login' again.")
    if row.expires_at <= now:
        return HubError("expired_token", "The code expired before it was approved; run 'hpcfair login' again.")
    if row.state == State.DENIED:
        return HubError("access_denied", f"{row.user} denied this sign-in on the hub's device page.")
    if row.state == State.APPROVED:
        return None
    early = row.last_polled is not None and now - row.last_polled < timedelta(seconds=row.interval) - _POLL_SLACK
    if early:
        row.interval += 5
    row.last_polled = now
    row.save(update_fields=["interval", "last_polled"])
    if early:
        return HubError("slow_down", f"Polled too often: wait {row.interval} s between requests.",
                        interval=row.interval)
    return HubError("authorization_pending", "Waiting for the code to be approved on the hub's device page.")


def refresh(refresh_token: str, client_id: str) -> dict[str, Any]:
    """A new pair for a refresh token, which then works no more (RFC 6749 6); refused once its access token was
    revoked (the account page's revoke ends the device login), or after it expired."""
    client_id = _client(client_id)
    with transaction.atomic():
        row = (RefreshToken.objects.select_for_update(of=("self",)).select_related("user", "access")
               .filter(key_hash=hash_token(refresh_token), client_id=client_id).first())
        now = timezone.now()
        if row is None or row.used is not None:
            raise HubError("invalid_grant", "This refresh token is unknown or was used; run 'hpcfair login' again.")
        if row.expires_at <= now or not row.user.is_active or row.access is None or row.access.revoked:
            raise HubError("invalid_grant", "This sign-in has expired or was revoked; run 'hpcfair login' again.")
        row.used = now
        row.save(update_fields=["used"])
        ApiToken.revoke(row.user, row.access.pk)
        answer = _pair(row.user, row.scope, client_id)
    audit.audit.info("device grant: tokens refreshed for %s (%s)", row.user.username, client_id)
    return answer
