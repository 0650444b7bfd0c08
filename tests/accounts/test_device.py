"""The device authorization grant (RFC 8628) through the hub's endpoints: each of the token endpoint's answers
as the RFC names it, the verification page, refresh tokens, and the audit lines."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from hub.accounts.device import GRANT_TYPE
from hub.accounts.models import ApiToken, DeviceAuthorization, RefreshToken

pytestmark = pytest.mark.django_db
CLIENT = "hpcfair-cli"


@pytest.fixture
def hub(settings) -> Client:
    settings.HUB_PUBLIC_URL = "http://hub.test"
    return Client()


def start(hub: Client, scope: str = "write") -> dict:
    answer = hub.post("/oauth/device_authorization", {"client_id": CLIENT, "scope": scope})
    assert answer.status_code == 200, answer.content
    return answer.json()


def poll(hub: Client, grant: dict):
    return hub.post("/oauth/token", {"grant_type": GRANT_TYPE, "device_code": grant["device_code"],
                                     "client_id": CLIENT})


def error_of(answer) -> str:
    body = answer.json()
    assert answer.status_code in (400, 401) and body["code"] == body["error"] == answer["X-Error-Code"]
    assert body["error_description"] == body["detail"] and answer["Cache-Control"] == "no-store"
    return body["error"]


def waited(grant: dict) -> None:
    """As if the client waited its interval since its last poll."""
    DeviceAuthorization.objects.filter(user_code=grant["user_code"]).update(
        last_polled=timezone.now() - timedelta(seconds=60))


def approve(owner, grant: dict, action: str = "approve"):
    browser = Client()
    browser.force_login(owner)
    return browser.post("/device", {"user_code": grant["user_code"].lower().replace("-", " "), "action": action})


def test_the_device_authorization_response_is_rfc_8628s(hub):
    grant = start(hub)
    assert set(grant) == {"device_code", "user_code", "verification_uri", "verification_uri_complete",
                          "expires_in", "interval"}
    assert grant["verification_uri"] == "http://hub.test/device"
    assert grant["verification_uri_complete"] == f"http://hub.test/device?user_code={grant['user_code']}"
    assert len(grant["user_code"]) == 9 and grant["user_code"][4] == "-"
    assert set(grant["user_code"].replace("-", "")) <= set("BCDFGHJKLMNPQRSTVWXZ")
    assert grant["expires_in"] == 600 and grant["interval"] == 5
    row = DeviceAuthorization.objects.get()
    assert grant["device_code"] not in row.device_code_hash  # stored hashed


def test_pending_then_slow_down_then_tokens_once(hub, owner, caplog):
    grant = start(hub)
    assert error_of(poll(hub, grant)) == "authorization_pending"
    slow = poll(hub, grant)  # at once: faster than the interval
    assert error_of(slow) == "slow_down" and slow.json()["interval"] == 10
    assert DeviceAuthorization.objects.get().interval == 10  # "for this and all subsequent requests"
    waited(grant)
    assert error_of(poll(hub, grant)) == "authorization_pending"
    with caplog.at_level(logging.INFO, logger="hub.audit"):
        assert approve(owner, grant).status_code == 302
        waited(grant)
        answer = poll(hub, grant)
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    tokens = answer.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600 and tokens["scope"] == "write"
    me = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}").json()
    assert me["username"] == owner.username and me["scope"] == "write"
    access = ApiToken.objects.get(user=owner)
    assert timedelta(minutes=59) < access.expires_at - timezone.now() <= timedelta(hours=1)
    waited(grant)
    assert error_of(poll(hub, grant)) == "invalid_grant"  # a device code is exchanged once
    lines = [r.getMessage() for r in caplog.records if r.name == "hub.audit"]
    assert any(line.startswith(f"sign-in ok: {owner.username} by device grant (hpcfair-cli, write)")
               for line in lines), lines


def test_a_denied_code_answers_access_denied_and_is_audited(hub, owner, caplog):
    grant = start(hub, scope="read")
    with caplog.at_level(logging.INFO, logger="hub.audit"):
        approve(owner, grant, action="deny")
    assert error_of(poll(hub, grant)) == "access_denied"
    assert any("sign-in refused" in r.getMessage() and "access_denied" in r.getMessage()
               for r in caplog.records if r.name == "hub.audit")


def test_an_expired_code_answers_expired_token_and_cannot_be_approved(hub, owner):
    grant = start(hub)
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert error_of(poll(hub, grant)) == "expired_token"
    page = approve(owner, grant)
    assert page.status_code == 404 and "hpcfair login" in page.content.decode()


def test_the_verification_page_asks_to_sign_in_and_shows_what_is_asked(hub, owner):
    grant = start(hub, scope="read")
    anonymous = Client().get(f"/device?user_code={grant['user_code']}")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/?next=/device")
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/device?user_code={grant['user_code']}").content.decode()
    assert f'value="{grant["user_code"]}"' in page and "asks for a <strong>read</strong> token" in page
    wrong = browser.get("/device?user_code=BBBB-BBBB")
    assert wrong.status_code == 404 and "mistyped" in wrong.content.decode()


def test_a_refresh_gives_a_new_pair_once_and_revoking_ends_the_login(hub, owner):
    grant = start(hub)
    approve(owner, grant)
    first = poll(hub, grant).json()
    refreshed = hub.post("/oauth/token", {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                          "client_id": CLIENT})
    assert refreshed.status_code == 200
    second = refreshed.json()
    assert second["access_token"] != first["access_token"] and second["refresh_token"] != first["refresh_token"]
    old = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {first['access_token']}")
    assert old.status_code == 401 and old["X-Error-Code"] == "invalid_token"  # the old access token is revoked
    again = hub.post("/oauth/token", {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                      "client_id": CLIENT})
    assert error_of(again) == "invalid_grant"
    ApiToken.revoke(owner, ApiToken.objects.get(key_hash__isnull=False, revoked__isnull=True).pk)
    after = hub.post("/oauth/token", {"grant_type": "refresh_token", "refresh_token": second["refresh_token"],
                                      "client_id": CLIENT})
    assert error_of(after) == "invalid_grant" and "revoked" in after.json()["detail"]
    assert RefreshToken.objects.count() == 2


def test_an_expired_refresh_token_is_refused(hub, owner):
    grant = start(hub)
    approve(owner, grant)
    tokens = poll(hub, grant).json()
    RefreshToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = hub.post("/oauth/token", {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                                       "client_id": CLIENT})
    assert error_of(answer) == "invalid_grant"


@pytest.mark.parametrize("path, form, code", [
    ("/oauth/device_authorization", {"client_id": "someone-else"}, "invalid_client"),
    ("/oauth/device_authorization", {}, "invalid_request"),
    ("/oauth/device_authorization", {"client_id": CLIENT, "scope": "root"}, "invalid_scope"),
    ("/oauth/token", {"grant_type": "password", "client_id": CLIENT}, "unsupported_grant_type"),
    ("/oauth/token", {"grant_type": GRANT_TYPE, "client_id": CLIENT}, "invalid_request"),
    ("/oauth/token", {"grant_type": GRANT_TYPE, "device_code": "nope", "client_id": CLIENT}, "invalid_grant"),
    ("/oauth/token", {"grant_type": "refresh_token", "refresh_token": "hpcr_nope", "client_id": CLIENT},
     "invalid_grant"),
])
def test_bad_requests_are_coded_refusals(hub, path, form, code):
    assert error_of(hub.post(path, form)) == code


def test_the_endpoints_take_only_posts(hub):
    assert hub.get("/oauth/token").status_code == 405
