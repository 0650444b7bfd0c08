"""The hub as an OpenID Connect relying party: the authorization code flow with PKCE (S256), a nonce and a state,
the provider's endpoints and keys found by discovery from ``HUB_OIDC_ISSUER``, and RP-initiated logout.

Authlib does the protocol: it is maintained, certified-grade (its own OpenID provider is used in production), and
in one package gives discovery, PKCE, the state kept in the session, the JWKS and the ID token's validation (its
signature, ``iss`` against the discovered issuer, ``aud`` against our client id, ``exp``, ``iat`` and the nonce).
mozilla-django-oidc, the other choice, needs every endpoint configured by hand and does not check ``iss``.
This module adds what is the hub's: the settings, the refusals as coded errors, and the person made from the
claims (``hub.accounts.people``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import requests
from authlib.integrations.base_client.errors import MismatchingStateError, OAuthError
from authlib.integrations.django_client import OAuth
from authlib.oidc.core import CodeIDToken
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest
from joserfc import errors as jose_errors

from hub.errors import HubError

log = logging.getLogger(__name__)
CALLBACK_PATH = "/accounts/oidc/callback"
SESSION_ID_TOKEN = "hub.oidc_id_token"  # noqa: S105 - a session key; kept for RP-initiated logout's id_token_hint
BACKEND = "hub.accounts.oidc.OIDCBackend"
LEEWAY_S = 60  # clock skew allowed on exp, iat and nbf
_clients: dict[tuple, Any] = {}


class OIDCBackend(ModelBackend):
    """The session's backend after an OpenID Connect sign-in; it checks no password (the callback signs in)."""

    def authenticate(self, request, **credentials):
        return None


@dataclass(frozen=True)
class Config:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str

    @classmethod
    def from_settings(cls) -> Config:
        if not settings.HUB_OIDC_ENABLED:
            raise HubError("signin_off", "This hub does not sign in through an OpenID provider; use its login page.")
        if not settings.HUB_OIDC_ISSUER or not settings.HUB_OIDC_CLIENT_ID:
            raise HubError("signin_unavailable", "Sign-in through the OpenID provider is on but not configured "
                                                 "(HUB_OIDC_ISSUER, HUB_OIDC_CLIENT_ID); tell the administrators.")
        return cls(settings.HUB_OIDC_ISSUER, settings.HUB_OIDC_CLIENT_ID, settings.HUB_OIDC_CLIENT_SECRET,
                   settings.HUB_OIDC_SCOPES)


def redirect_uri() -> str:
    """The redirect URI to register at the provider."""
    return settings.HUB_PUBLIC_URL + CALLBACK_PATH


def client():
    """Authlib's client for the configured provider, one per configuration (its metadata and keys are fetched
    once and kept)."""
    config = Config.from_settings()
    found = _clients.get(tuple(vars(config).values()))
    if found is None:
        oauth = OAuth()
        found = oauth.register(
            name="hub", client_id=config.client_id, client_secret=config.client_secret or None,
            server_metadata_url=f"{config.issuer}/.well-known/openid-configuration",
            client_kwargs={"scope": config.scopes, "code_challenge_method": "S256",
                           "token_endpoint_auth_method": "client_secret_basic" if config.client_secret else "none"})
        _clients[tuple(vars(config).values())] = found
    return found


def metadata() -> dict[str, Any]:
    """The provider's discovery document, checked: its ``issuer`` must be the one configured (OpenID Connect
    Discovery 4.3), else a document from elsewhere could hand the hub another provider's keys."""
    oidc = client()
    try:
        found = oidc.load_server_metadata()
    except (requests.RequestException, ValueError):
        _clients.clear()  # try discovery again next time
        raise HubError("signin_unavailable", f"The OpenID provider {settings.HUB_OIDC_ISSUER} cannot be reached or "
                                             "gave no discovery document; try again later or tell the administrators.")
    if str(found.get("issuer", "")).rstrip("/") != settings.HUB_OIDC_ISSUER:
        _clients.clear()
        raise HubError("signin_issuer", f"The provider at {settings.HUB_OIDC_ISSUER} says its issuer is "
                                        f"{found.get('issuer')!r}; HUB_OIDC_ISSUER must be exactly the issuer.")
    return found


def refusal(exc: Exception) -> HubError:
    """An Authlib (or joserfc, or requests) error as the hub's coded refusal, whose message says what to do; any
    other error is logged with its traceback and answered as a refusal, never a 500."""
    again = "Start again from the login page."
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, MismatchingStateError):
        return HubError("signin_state", "This sign-in answer does not belong to a sign-in started in this browser "
                                        f"(wrong or reused state). {again}")
    if isinstance(exc, jose_errors.ExpiredTokenError):
        return HubError("signin_expired", f"The provider's ID token has expired; check the clocks. {again}")
    if isinstance(exc, (jose_errors.InvalidClaimError, jose_errors.MissingClaimError)):
        claim = exc.claim
        code = {"nonce": "signin_nonce", "aud": "signin_audience", "azp": "signin_audience",
                "iss": "signin_issuer", "exp": "signin_expired"}.get(claim, "signin_refused")
        what = {"signin_nonce": "was not made for this sign-in (wrong nonce)",
                "signin_audience": "was made for another client (wrong audience)",
                "signin_issuer": "comes from another issuer than the configured one",
                "signin_expired": "has expired"}.get(code, f"has a wrong or missing claim {claim!r}")
        return HubError(code, f"The ID token {what}. {again}")
    if isinstance(exc, jose_errors.JoseError):
        return HubError("signin_refused", f"The ID token could not be verified with the provider's keys. {again}")
    if isinstance(exc, OAuthError):
        said = exc.error or "error"
        return HubError("signin_refused", f"The provider refused the sign-in ({said}). {again}")
    if isinstance(exc, requests.RequestException):
        return HubError("signin_unavailable", "The OpenID provider cannot be reached; try again later.")
    log.exception("an OpenID provider's answer could not be used")  # e.g. a token response that is not JSON
    return HubError("signin_refused", f"The provider's answer could not be used; the administrators can see why in "
                                      f"the hub's log. {again}")


def claims_options() -> dict[str, Any]:
    """What the ID token's claims must be: the discovered issuer, and an audience that holds our client id
    (OpenID Connect Core 3.1.3.7; Authlib alone checks only ``azp`` when ``aud`` names other clients)."""
    return {"iss": {"essential": True, "values": [metadata()["issuer"]]},
            "aud": {"essential": True, "values": [settings.HUB_OIDC_CLIENT_ID]}}


def start(request: HttpRequest):
    """The redirect to the provider's authorization endpoint (state, nonce and PKCE verifier kept in the
    session)."""
    metadata()
    return client().authorize_redirect(request, redirect_uri())


def finish(request: HttpRequest) -> tuple[dict[str, Any], str]:
    """The callback: the state checked, the code exchanged (with the PKCE verifier), the ID token verified.
    Returns (its claims, the raw ID token); raises the coded refusal."""
    try:
        token = client().authorize_access_token(request, claims_options=claims_options(), leeway=LEEWAY_S)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a coded HubError (unknown ones logged)
        raise refusal(exc) from None
    claims = dict(token.get("userinfo") or {})
    if not claims.get("sub"):
        raise HubError("signin_refused", "The provider gave no ID token; its client must have the 'openid' scope.")
    return claims, token["id_token"]


def verify_id_token(raw: str, nonce: str) -> dict[str, Any]:
    """The same ID-token check ``finish`` makes (Authlib's, with the provider's keys from its jwks_uri), for a
    token in hand: its claims, or the coded refusal."""
    try:
        return dict(client().parse_id_token({"id_token": raw}, nonce=nonce, claims_options=claims_options(),
                                            claims_cls=CodeIDToken,
                                            leeway=LEEWAY_S))
    except Exception as exc:  # noqa: BLE001
        raise refusal(exc) from None


def logout_url(id_token: str | None) -> str | None:
    """Where to send the browser after signing out here, to sign out at the provider too (RP-initiated logout
    1.0); None when the provider has no end_session_endpoint or the site turned it off."""
    if not settings.HUB_OIDC_LOGOUT or not settings.HUB_OIDC_ENABLED:
        return None
    try:
        endpoint = metadata().get("end_session_endpoint")
    except HubError:
        return None
    if not endpoint:
        return None
    from urllib.parse import urlencode

    params = {"client_id": settings.HUB_OIDC_CLIENT_ID, "post_logout_redirect_uri": settings.HUB_PUBLIC_URL + "/"}
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}?{urlencode(params)}"
