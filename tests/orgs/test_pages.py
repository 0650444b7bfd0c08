"""The pages: an organization's page (its artifacts, its members to members, the admins' member forms), and
the account page (your organizations; tokens with a scope and a limit)."""

from __future__ import annotations

import pytest
from django.test import Client

from hub.accounts.models import ApiToken
from hub.orgs import services as orgs
from hub.orgs.models import Membership
from hub.registry import services

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_organization_page_lists_artifacts_and_members_to_members(owner, collaborator, other):
    lab = orgs.create_organization(owner, "lab", "The Lab")
    services.create_artifact(lab.account, kind="model", name="open-net")
    services.create_artifact(lab.account, kind="model", name="members-net", visibility="organization")
    stranger = Client().get("/orgs/lab/").content.decode()
    assert "The Lab" in stranger and "open-net" in stranger and "members-net" not in stranger
    assert 'id="members"' not in stranger
    admin = signed_in(owner)
    added = admin.post("/orgs/lab/", {"action": "set", "username": "bob", "role": "read"}, follow=True)
    assert "bob is a member of lab with the read role" in added.content.decode()
    bob_page = signed_in(collaborator).get("/orgs/lab/").content.decode()
    assert "members-net" in bob_page and "your role: <strong>read</strong>" in bob_page and ">alice<" in bob_page
    refused = signed_in(collaborator).post("/orgs/lab/", {"action": "set", "username": "mallory", "role": "admin"},
                                           follow=True).content.decode()
    assert "you need the admin role" in refused and "ask an admin of lab: alice" in refused
    assert not Membership.objects.filter(user=other).exists()
    last = admin.post("/orgs/lab/", {"action": "remove", "username": "alice"}, follow=True).content.decode()
    assert "last admin" in last
    assert signed_in(collaborator).post("/orgs/lab/", {"action": "remove", "username": "bob"}).status_code == 302
    assert not Membership.objects.filter(user=collaborator).exists()  # bob left
    assert Client().get("/orgs/nolab/").status_code == 404
    assert "/orgs/lab/" in Client().get("/owners/lab/").content.decode()


def test_the_account_page_lists_organizations_and_makes_limited_tokens(owner):
    orgs.create_organization(owner, "lab")
    page = signed_in(owner)
    html = page.get("/account/").content.decode()
    assert 'href="/orgs/lab/"' in html and "admin" in html and 'value="publish"' in html
    page.post("/account/", {"action": "create", "scope": "publish", "name": "ci", "org": "lab"})
    token = ApiToken.objects.get(name="ci")
    assert token.scope == "publish" and token.org.slug == "lab"
    assert "organization lab" in page.get("/account/").content.decode()
    refused = page.post("/account/", {"action": "create", "scope": "read", "artifact": "nobody/nothing"},
                        follow=True).content.decode()
    assert "No token was made" in refused and "No artifact nobody/nothing" in refused
    assert ApiToken.objects.count() == 1
