"""Password guessing is slowed down on every place that takes a password: HTTP Basic at /api/v1/tokens/ (which
mints tokens), the login page and the admin's login. Counted per account and per address, in the database."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from hub.accounts.models import ApiToken, LoginFailures
from tests.accounts.test_me_and_tokens import basic
from tests.conftest import client_for

pytestmark = pytest.mark.django_db
PASSWORD = "the-right-one-42"


@pytest.fixture
def alice(owner):
    owner.set_password(PASSWORD)
    owner.save()
    return owner


def mint(password: str, username: str = "alice", address: str = "127.0.0.1"):
    return APIClient().post("/api/v1/tokens/", {"scope": "read"}, format="json", REMOTE_ADDR=address,
                            **basic(username, password))


def end_pauses() -> None:
    """As if the pauses had run out (instead of sleeping through them)."""
    LoginFailures.objects.update(locked_until=timezone.now())


def test_fifty_guesses_then_the_right_password_is_refused(alice, caplog):
    caplog.set_level(logging.WARNING, logger="hub.audit")
    answers = [mint(f"guess-{n}").status_code for n in range(50)]
    assert answers[:7] == [401] * 6 + [429]  # the free allowance, then the 6th pauses (1 s, then 2 s, ...)
    assert answers.count(401) <= 8  # a slow machine may outlast a pause or two; each one doubles
    right = mint(PASSWORD)
    assert right.status_code == 429 and right.json()["code"] == "too_many_attempts"
    assert right["X-Error-Code"] == "too_many_attempts" and int(right["Retry-After"]) >= 1
    assert "paused" in right.json()["detail"] and not ApiToken.objects.exists()
    audit = [r.getMessage() for r in caplog.records if r.name == "hub.audit"]  # every refusal is a line, too
    assert audit.count("sign-in refused: alice by password/ldap from 127.0.0.1 (wrong credentials)") >= 6
    assert [line for line in audit if line.startswith("sign-in paused")][0] == \
        "sign-in paused for 1 s: account:alice after 6 wrong passwords"


def test_each_pause_doubles_and_a_success_clears_the_account(alice):
    for n in range(6):
        mint(f"guess-{n}")
    pauses = []
    for n in range(4):
        end_pauses()
        assert mint(f"again-{n}").status_code == 401  # checked once the pause is over, and wrong
        pauses.append(int(mint(PASSWORD)["Retry-After"]))
    assert pauses == [2, 4, 8, 16]
    end_pauses()
    assert mint(PASSWORD).status_code == 201
    assert not LoginFailures.objects.filter(key="account:alice").exists()
    assert mint("one-slip").status_code == 401 and mint(PASSWORD).status_code == 201  # a fresh allowance


def test_guessing_over_many_accounts_pauses_the_address_not_others(alice):
    answers = [mint("x", username=f"user{n}", address="192.0.2.7").status_code for n in range(25)]
    assert answers[:21] == [401] * 21 and answers[21:] == [429] * 4
    assert mint(PASSWORD, address="192.0.2.7").status_code == 429  # alice, from the guessing address
    assert mint(PASSWORD, address="192.0.2.8").status_code == 201  # alice elsewhere is not affected


def test_a_paused_account_keeps_its_tokens(alice):
    api = client_for(alice)
    for n in range(7):
        mint(f"guess-{n}")
    assert api.get("/api/v1/me").json()["username"] == "alice"


def test_the_login_page_pauses_too_and_says_so(alice):
    browser = Client()
    for n in range(6):
        page = browser.post("/accounts/login/", {"username": "alice", "password": f"guess-{n}"})
        assert page.status_code == 200 and b"role=\"alert\"" in page.content
    page = browser.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert page.status_code == 429 and int(page["Retry-After"]) >= 1
    assert b"Too many wrong passwords" in page.content and b'value="alice"' in page.content
    assert "_auth_user_id" not in browser.session  # not signed in
    end_pauses()
    assert browser.post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


def test_the_admin_login_answers_429_not_500(alice):
    alice.is_staff = True
    alice.save()
    for n in range(6):
        mint(f"guess-{n}")
    page = Client().post("/admin/login/", {"username": "alice", "password": PASSWORD})
    assert page.status_code == 429 and page["X-Error-Code"] == "too_many_attempts" and page["Retry-After"]
