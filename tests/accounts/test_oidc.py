"""Sign-in through a real OpenID provider (npm's certified ``oidc-provider``, started by the suite on 127.0.0.1):
headless Chromium completes the authorization code flow with PKCE against the live hub, and the refusals.

What each test proves:
- the browser tests: the whole flow over HTTP, discovery, the provider's own login form, PKCE (the provider is
  configured to refuse any authorization request without an S256 code challenge), the code exchanged with the
  client secret, the ID token the provider signed verified with the keys from its jwks_uri, the person made and
  then updated from its claims, the group mapping's hook, RP-initiated logout; and a callback whose state is
  wrong or used already, refused;
- the discovery test: a provider whose discovery document names another issuer than the configured one;
- the ID-token tests: tokens signed with the provider's own private key (the test generated it and gave it to
  the provider, which publishes it at its jwks_uri), each wrong in one way (nonce, audience, issuer, expiry,
  signature), through the same check (``hub.accounts.oidc.verify_id_token``, Authlib's ``parse_id_token`` with
  the hub's claim options) that the callback runs. The provider itself never issues such tokens, which is why
  they are made here rather than through the browser."""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from joserfc import jwt
from joserfc.jwk import RSAKey

from hub.accounts import oidc
from hub.accounts.models import ExternalIdentity
from hub.errors import HubError
from tests.accounts.conftest import ADA, CLIENT_ID

pytestmark = pytest.mark.django_db(transaction=True)


def audit_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "hub.audit"]


def sign_in(page, base: str, password: str = ADA["password"]) -> None:
    """From the hub's login page through the provider's form, back to the hub."""
    page.goto(f"{base}/accounts/login/?next=/account/")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    page.get_by_label("Username").fill(ADA["preferred_username"])
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in to the IdP").click()


def test_the_browser_signs_in_through_the_provider_and_out_again(browser, live_server, oidc_settings,
                                                                  oidc_provider, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/account/")
    assert page.get_by_role("heading", name="ada").is_visible()
    ada = get_user_model().objects.get(username="ada")
    assert (ada.first_name, ada.last_name, ada.email) == ("Ada", "Lovelace", "ada@lab.example")
    assert not ada.has_usable_password()
    identity = ExternalIdentity.objects.get(user=ada)
    assert (identity.issuer, identity.subject, identity.orcid) == (oidc_provider.issuer, "ada-0001",
                                                                   "0000-0002-1825-0097")
    lines = audit_lines(caplog)
    assert "sign-in ok: ada by oidc from 127.0.0.1" in lines
    assert "memberships from oidc for ada: hpc-lab:write" in lines

    # RP-initiated logout: out of the hub, then out at the provider, and back on the hub's home page
    page.get_by_role("button", name="Log out").first.click()
    page.wait_for_url(f"{oidc_provider.issuer}/**")
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{live_server.url}/")
    assert page.get_by_role("link", name="Log in").first.is_visible()

    # a later sign-in finds the same person by the identity and updates them from the claims
    oidc_provider.set_user(family_name="King", email="ada@newlab.example", groups=["lab-admins"])
    sign_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/account/")
    ada.refresh_from_db()
    assert (ada.last_name, ada.email) == ("King", "ada@newlab.example")
    assert get_user_model().objects.filter(username__startswith="ada").count() == 1
    assert "memberships from oidc for ada: hpc-lab:admin" in audit_lines(caplog)
    context.close()


def test_a_local_account_with_the_same_name_is_not_taken_over(browser, live_server, oidc_settings,
                                                               make_user):
    make_user("ada")
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/account/")
    assert page.get_by_role("heading", name="ada-2").is_visible()
    assert ExternalIdentity.objects.get().user.username == "ada-2"
    context.close()


def test_a_callback_with_a_wrong_or_used_state_is_refused(browser, live_server, oidc_settings, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    context = browser.new_context()
    page = context.new_page()
    callbacks: list[str] = []
    page.on("request", lambda request: callbacks.append(request.url) if "/accounts/oidc/callback" in request.url
            else None)
    sign_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/account/")  # the real callback signed in, and used its state
    real = callbacks[0]
    assert "code=" in real and "state=" in real
    replayed = page.goto(real)
    assert replayed.status == 400 and replayed.headers["x-error-code"] == "signin_state"
    assert "wrong or reused state" in page.get_by_role("alert").inner_text()
    page.goto(f"{live_server.url}/accounts/oidc/login")  # a new sign-in; its answer comes with another state
    page.wait_for_url(f"{live_server.url}/")  # (the provider remembers ada: no form this time)
    second = callbacks[-1]
    assert second != real
    callbacks.clear()
    page.context.clear_cookies()  # a fresh browser: a new sign-in started in it, then an old answer sent
    page.goto(f"{live_server.url}/accounts/oidc/login")
    tampered = page.goto(second.replace("state=", "state=x", 1))
    assert tampered.status == 400 and tampered.headers["x-error-code"] == "signin_state"
    assert any(line.endswith("(signin_state)") and "by oidc" in line for line in audit_lines(caplog))
    context.close()


def test_a_provider_whose_discovery_names_another_issuer_is_refused(client, oidc_settings, oidc_provider, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    oidc_settings.HUB_OIDC_ISSUER = oidc_provider.issuer.replace("127.0.0.1", "localhost")
    answer = client.get("/accounts/oidc/login")
    assert answer.status_code == 400 and answer["X-Error-Code"] == "signin_issuer"
    assert "HUB_OIDC_ISSUER must be exactly the issuer" in answer.content.decode()
    assert any("(signin_issuer)" in line for line in audit_lines(caplog))
    json_answer = client.get("/accounts/oidc/login", HTTP_ACCEPT="application/json")
    assert json_answer.json()["code"] == "signin_issuer"


def test_sign_in_is_off_unless_the_site_turns_it_on(client):
    answer = client.get("/accounts/oidc/login")
    assert answer.status_code == 404 and answer["X-Error-Code"] == "signin_off"
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


def id_token(key: RSAKey, issuer: str, **claims) -> str:
    now = int(time.time())
    body = {"iss": issuer, "sub": "ada-0001", "aud": CLIENT_ID, "iat": now, "exp": now + 300, "nonce": "n-1",
            **claims}
    return jwt.encode({"alg": "RS256", "kid": key.kid}, {k: v for k, v in body.items() if v is not None}, key)


def test_an_id_token_signed_with_the_providers_key_passes(oidc_settings, oidc_provider):
    claims = oidc.verify_id_token(id_token(oidc_provider.key, oidc_provider.issuer), nonce="n-1")
    assert claims["sub"] == "ada-0001" and claims["aud"] == CLIENT_ID


@pytest.mark.parametrize("claims, code", [
    ({"nonce": "another-sign-in"}, "signin_nonce"),
    ({"nonce": None}, "signin_nonce"),
    ({"aud": "another-client"}, "signin_audience"),
    ({"aud": ["another-client"], "azp": CLIENT_ID}, "signin_audience"),  # Authlib alone lets this one through
    ({"iss": "http://127.0.0.1:1/elsewhere"}, "signin_issuer"),
    ({"exp": int(time.time()) - 600, "iat": int(time.time()) - 900}, "signin_expired"),
])
def test_an_id_token_wrong_in_one_way_is_refused(oidc_settings, oidc_provider, claims, code):
    token = id_token(oidc_provider.key, oidc_provider.issuer, **claims)
    with pytest.raises(HubError) as refused:
        oidc.verify_id_token(token, nonce="n-1")
    assert refused.value.code == code and refused.value.status_code == 400
    assert "Start again from the login page" in refused.value.message


def test_an_id_token_signed_with_another_key_is_refused(oidc_settings, oidc_provider):
    forged = RSAKey.generate_key(2048, parameters={"kid": oidc_provider.key.kid})
    with pytest.raises(HubError) as refused:
        oidc.verify_id_token(id_token(forged, oidc_provider.issuer), nonce="n-1")
    assert refused.value.code == "signin_refused" and "provider's keys" in refused.value.message


def test_the_authorization_request_carries_pkce_a_state_and_a_nonce(client, oidc_settings, oidc_provider):
    sent = client.get("/accounts/oidc/login")
    assert sent.status_code == 302
    url = urlsplit(sent["Location"])
    asked = {key: values[0] for key, values in parse_qs(url.query).items()}
    assert f"{url.scheme}://{url.netloc}" == oidc_provider.issuer
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert asked["state"] and asked["nonce"] and asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == f"{oidc_settings.HUB_PUBLIC_URL}/accounts/oidc/callback"
    # and the provider would refuse the same request without PKCE: the flows above did use it
    bare = {k: v for k, v in asked.items() if not k.startswith("code_challenge")}
    refused = requests.get(f"{oidc_provider.issuer}{url.path}", params=bare, allow_redirects=False, timeout=30)
    assert refused.status_code in (302, 303) and "error=invalid_request" in refused.headers["Location"]
    assert "requires PKCE" in parse_qs(urlsplit(refused.headers["Location"]).query)["error_description"][0]


def test_an_answer_carrying_the_providers_refusal_is_refused(client, oidc_settings, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    client.get("/accounts/oidc/login")
    answer = client.get("/accounts/oidc/callback?error=access_denied&error_description=cancelled&state=x")
    assert answer.status_code == 400 and answer["X-Error-Code"] == "signin_refused"
    assert "refused the sign-in (access_denied)" in answer.content.decode()
    assert any(line.endswith("(signin_refused)") for line in audit_lines(caplog))
