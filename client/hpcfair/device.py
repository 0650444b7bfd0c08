"""Signing in from a terminal with no browser: the OAuth 2.0 device authorization grant (RFC 8628) against the
hub. ``login`` prints a short URL and a code, polls the token endpoint as the RFC says (``authorization_pending``:
wait; ``slow_down``: wait 5 s longer from then on; ``expired_token``, ``access_denied``: stop) and returns the
tokens; ``refresh`` trades a refresh token for a new pair, which the client does when the saved token expired."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from hpcfair import settings
from hpcfair.errors import AccessDeniedError, HubError, TransferError, from_response

CLIENT_ID = "hpcfair-cli"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
EARLY_S = 60.0  # a saved token this close to its expiry is refreshed first


def _post(endpoint: str, path: str, form: dict[str, str]) -> requests.Response:
    try:
        return requests.post(f"{endpoint}/oauth/{path}", data=form, timeout=60)
    except requests.RequestException as exc:
        raise TransferError(f"Cannot reach the hub at {endpoint} ({type(exc).__name__}); is it running?",
                            code="unreachable") from None


def login(endpoint: str, scope: str = "write", echo: Callable[[str], None] = print,
          sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """The device flow to its end: the token response (``access_token``, ``refresh_token``, ``expires_in``)."""
    started = _post(endpoint, "device_authorization", {"client_id": CLIENT_ID, "scope": scope})
    if started.status_code != 200:
        raise from_response(started)
    grant = started.json()
    echo(f"To sign in, open {grant['verification_uri']} in a browser and enter the code {grant['user_code']}")
    echo(f"(or open {grant['verification_uri_complete']}); waiting for your approval...")
    interval = float(grant.get("interval") or 5)
    deadline = time.monotonic() + float(grant.get("expires_in") or 600)
    while True:
        sleep(interval)
        answer = _post(endpoint, "token", {"grant_type": GRANT_TYPE, "device_code": grant["device_code"],
                                           "client_id": CLIENT_ID})
        if answer.status_code == 200:
            return answer.json()
        error = _error(answer)
        if error == "authorization_pending" and time.monotonic() < deadline:
            continue
        if error == "slow_down":
            interval += 5
            continue
        raise from_response(answer)


def _error(response: requests.Response) -> str:
    try:
        return str(response.json().get("error", ""))
    except ValueError:
        return ""


def refresh(endpoint: str, refresh_token: str) -> dict[str, Any]:
    """A new access token and refresh token for ``refresh_token`` (which then works no more)."""
    answer = _post(endpoint, "token", {"grant_type": "refresh_token", "refresh_token": refresh_token,
                                       "client_id": CLIENT_ID})
    if answer.status_code != 200:
        error = from_response(answer)
        raise AccessDeniedError(f"{error.message} (the saved sign-in could not be renewed)", code=error.code,
                                status=error.status, body=error.body)
    return answer.json()


def save(endpoint: str, tokens: dict[str, Any]):
    """The token response written to the login file, with the access token's expiry as a time."""
    return settings.save_login(endpoint, tokens["access_token"], refresh_token=tokens.get("refresh_token"),
                               expires_at=time.time() + float(tokens.get("expires_in") or 0))


def current(chosen: settings.Settings) -> str | None:
    """The token to send: the chosen one, renewed first (and saved) when it is the login file's and has
    expired or is about to."""
    if not chosen.refresh_token or chosen.expires_at - EARLY_S > time.time():
        return chosen.token
    try:
        tokens = refresh(chosen.endpoint, chosen.refresh_token)
    except HubError:
        return chosen.token  # the hub answers with the token's own refusal (token_expired) and says what to do
    save(chosen.endpoint, tokens)
    return tokens["access_token"]
