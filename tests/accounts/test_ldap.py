"""Sign-in with a directory password: a bind to a real OpenLDAP ``slapd`` (started by the suite), the person's
groups searched, the person made and kept current from the directory, the group mapping's hook, the audit lines;
local passwords turned off; a token made with the directory password (``hpcfair login --username``)."""

from __future__ import annotations

import base64
import logging

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from hub.accounts.models import ApiToken, ExternalIdentity
from tests.accounts.conftest import LDAP_BASE

pytestmark = pytest.mark.django_db


def audit_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "hub.audit"]


def log_in(username: str, password: str):
    client = Client()
    return client, client.post("/accounts/login/", {"username": username, "password": password})


def test_a_directory_password_signs_in_and_the_groups_are_mapped(ldap_settings, slapd, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    client, answer = log_in("grace", "grace-ldap-pw")
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert client.get("/api/v1/me").json()["username"] == "grace"
    grace = get_user_model().objects.get(username="grace")
    assert (grace.first_name, grace.last_name, grace.email) == ("Grace", "Hopper", "grace@lab.example")
    identity = ExternalIdentity.objects.get(user=grace)
    assert (identity.issuer, identity.subject) == (f"ldap:{slapd}", f"uid=grace,ou=people,{LDAP_BASE}")
    lines = audit_lines(caplog)
    assert "sign-in ok: grace by ldap from 127.0.0.1" in lines
    assert "memberships from ldap for grace: hpc-lab:admin, ops:read" in lines
    _, again = log_in("linus", "linus-ldap-pw")
    assert again.status_code == 302
    assert "memberships from ldap for linus: hpc-lab:write" in audit_lines(caplog)


def test_a_wrong_directory_password_is_refused_and_audited(ldap_settings, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    _, answer = log_in("grace", "not-her-password")
    assert answer.status_code == 200 and "Please enter a correct username and password" in answer.content.decode()
    assert not get_user_model().objects.filter(username="grace").exists()
    assert any(line.startswith("sign-in refused: grace by password/ldap") for line in audit_lines(caplog))


def test_with_local_passwords_off_only_the_directory_signs_in(ldap_settings, make_user):
    ldap_settings.HUB_LOCAL_PASSWORDS = False
    make_user("local")  # password local-pw-12345, in the hub's own database
    _, local = log_in("local", "local-pw-12345")
    assert local.status_code == 200
    page = Client().get("/accounts/login/").content.decode()
    assert "With your directory (LDAP) username and password." in page
    _, directory = log_in("grace", "grace-ldap-pw")
    assert directory.status_code == 302


def test_hpcfair_login_with_a_directory_password_makes_a_token(ldap_settings):
    basic = base64.b64encode(b"grace:grace-ldap-pw").decode()
    made = Client().post("/api/v1/tokens/", {"scope": "read"}, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Basic {basic}")
    assert made.status_code == 201 and ApiToken.objects.get().user.username == "grace"


@pytest.mark.django_db(transaction=True)
def test_chromium_signs_in_with_a_directory_password(browser, live_server, ldap_settings):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/?next=/account/")
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill("grace-ldap-pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/account/")
    assert page.get_by_role("heading", name="grace").is_visible()
    context.close()
