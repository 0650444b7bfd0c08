"""Token expiry: a site default and maximum, chosen through the API and the account page, expired tokens
refused with a coded 401, tokens made before expiry existed working as before."""

from __future__ import annotations

import base64
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from hub.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def basic(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(
        f"{user.username}:{user.username}-pw-12345".encode()).decode())
    return client


def days_left(answer: dict) -> float:
    ends = timezone.datetime.fromisoformat(answer["expires_at"].replace("Z", "+00:00"))
    return (ends - timezone.now()) / timedelta(days=1)


def test_a_new_token_gets_the_sites_default_expiry(owner, settings):
    settings.HUB_TOKEN_DEFAULT_DAYS, settings.HUB_TOKEN_MAX_DAYS = 30, 90
    made = basic(owner).post("/api/v1/tokens/", {"scope": "read"}, format="json")
    assert made.status_code == 201 and 29.9 < days_left(made.json()) <= 30
    asked = basic(owner).post("/api/v1/tokens/", {"expires_days": 7}, format="json").json()
    assert 6.9 < days_left(asked) <= 7
    listed = basic(owner).get("/api/v1/tokens/").json()
    assert {round(days_left(t)) for t in listed} == {7, 30}


@pytest.mark.parametrize("days", [91, 0, -1])
def test_a_lifetime_past_the_maximum_is_refused_with_what_to_ask_for(owner, settings, days):
    settings.HUB_TOKEN_DEFAULT_DAYS, settings.HUB_TOKEN_MAX_DAYS = 30, 90
    refused = basic(owner).post("/api/v1/tokens/", {"expires_days": days}, format="json")
    assert refused.status_code == 400 and refused["X-Error-Code"] == "invalid"
    assert "90" in refused.json()["detail"] or "expires_days" in refused.json()["detail"]
    assert not ApiToken.objects.exists()


def test_a_site_without_a_maximum_may_make_tokens_that_never_expire(owner, settings):
    settings.HUB_TOKEN_DEFAULT_DAYS, settings.HUB_TOKEN_MAX_DAYS = 0, 0
    made = basic(owner).post("/api/v1/tokens/", {}, format="json").json()
    assert made["expires_at"] is None
    assert basic(owner).post("/api/v1/tokens/", {"expires_days": 3650}, format="json").status_code == 201


def test_an_expired_token_is_refused_with_a_coded_401_and_an_old_one_works(owner):
    _, raw = ApiToken.issue(owner, expires_at=timezone.now() - timedelta(seconds=1))
    _, old = ApiToken.issue(owner)  # no expiry: made before expiry existed
    refused = APIClient().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert refused.status_code == 401 and refused["X-Error-Code"] == "token_expired"
    assert refused.json()["code"] == "token_expired" and "hpcfair login" in refused.json()["detail"]
    assert refused["WWW-Authenticate"].startswith("Bearer")
    me = APIClient().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {old}").json()
    assert me["authenticated"] and me["username"] == owner.username


def test_the_account_page_offers_lifetimes_and_shows_each_tokens_expiry(owner, settings):
    settings.HUB_TOKEN_DEFAULT_DAYS, settings.HUB_TOKEN_MAX_DAYS = 30, 60
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/account/").content.decode()
    assert '<option value="30" selected>30 days</option>' in page and '<option value="60">60 days</option>' in page
    assert "365 days" not in page and ">never</option>" not in page
    browser.post("/account/", {"action": "create", "scope": "read", "expires_days": "7"})
    token = ApiToken.objects.get()
    assert timedelta(days=6.9) < token.expires_at - timezone.now() <= timedelta(days=7)
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(days=1))
    assert "<strong>expired</strong>" in browser.get("/account/").content.decode()
    browser.post("/account/", {"action": "create", "scope": "read", "expires_days": "61"})
    assert ApiToken.objects.count() == 1
    assert "60 days at most" in browser.get("/account/").content.decode()


@pytest.mark.parametrize("days", ["36501", "99999999999999999999"])
def test_a_lifetime_no_date_can_hold_is_refused_even_without_a_maximum(owner, settings, days):
    settings.HUB_TOKEN_MAX_DAYS = 0
    refused = basic(owner).post("/api/v1/tokens/", {"expires_days": int(days)}, format="json")
    assert refused.status_code == 400 and refused["X-Error-Code"] == "invalid"
    browser = Client()
    browser.force_login(owner)
    browser.post("/account/", {"action": "create", "scope": "read", "expires_days": days})
    assert not ApiToken.objects.exists()


def test_me_says_when_the_token_expires(owner):
    _, raw = ApiToken.issue(owner, expires_at=timezone.now() + timedelta(days=2))
    me = APIClient().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert 1.9 < days_left(me) <= 2


def test_hub_token_makes_tokens_that_expire_as_the_sites_do(owner, settings):
    settings.HUB_TOKEN_DEFAULT_DAYS, settings.HUB_TOKEN_MAX_DAYS = 30, 90
    call_command("hub_token", owner.username, stdout=io.StringIO())
    call_command("hub_token", owner.username, "--days", "2", stdout=io.StringIO())
    assert sorted(round((t.expires_at - timezone.now()) / timedelta(days=1)) for t in ApiToken.objects.all()) \
        == [2, 30]
    with pytest.raises(CommandError, match="90 days at most"):
        call_command("hub_token", owner.username, "--days", "91", stdout=io.StringIO())
