"""Organizations through the REST API on PostgreSQL: one namespace with people, roles, the last admin,
publishing into an organization, the identity provider's sync, and each change one ``hub.audit`` line."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from django.contrib.auth import get_user_model

from hub.accounts.backends import ThrottledModelBackend
from hub.orgs import services
from hub.orgs.models import Membership
from tests.conftest import client_for, multipart_file, valid_metadata

pytestmark = pytest.mark.django_db


def basic(username: str, password: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


@pytest.fixture
def lab(owner):
    return services.create_organization(owner, "lab", "The Lab")


def test_an_organization_shares_the_namespace_of_people(owner, other, anon, django_assert_num_queries):
    alice = client_for(owner)
    made = alice.post("/api/v1/orgs/", {"name": "lab", "title": "The Lab"}, format="json")
    assert made.status_code == 201 and made.json()["name"] == "lab"
    for taken in ("lab", "LAB", "mallory"):
        again = alice.post("/api/v1/orgs/", {"name": taken}, format="json")
        assert again.status_code == 409 and again.json()["code"] == "already_exists", taken
        assert "one namespace" in again.json()["detail"]
    bad = alice.post("/api/v1/orgs/", {"name": "../x"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    # A person cannot take the organization's name as a username either: it is a row of the same table.
    assert get_user_model().objects.filter(username="lab").count() == 1
    # The organization's account never signs in with a password.
    assert anon.post("/api/v1/tokens/", {}, format="json", **basic("lab", "")).status_code == 401
    # Nor has it a session (one query for a session's person, the organization check inside it).
    backend, account = ThrottledModelBackend(), get_user_model().objects.get(username="lab")
    with django_assert_num_queries(1):
        assert backend.get_user(account.pk) is None
    with django_assert_num_queries(1):
        assert backend.get_user(owner.pk) == owner
    mine = alice.get("/api/v1/orgs/?member=me").json()
    assert [(o["name"], o["role"]) for o in mine] == [("lab", "admin")]
    public = anon.get("/api/v1/orgs/lab/").json()
    assert public["role"] is None and "members" not in public


def test_roles_are_given_by_admins_and_the_last_admin_stays(lab, owner, collaborator, other, caplog):
    alice, bob, mallory = client_for(owner), client_for(collaborator), client_for(other)
    caplog.set_level(logging.INFO, logger="hub.audit")
    assert alice.put("/api/v1/orgs/lab/members/bob", {"role": "write"}, format="json").json()["role"] == "write"
    refused = bob.put("/api/v1/orgs/lab/members/mallory", {"role": "read"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert "admin role" in refused.json()["detail"] and "alice" in refused.json()["detail"]  # whom to ask
    stranger = mallory.get("/api/v1/orgs/lab/members/")
    assert stranger.status_code == 403 and "not a member" in stranger.json()["detail"]
    assert [m["username"] for m in bob.get("/api/v1/orgs/lab/members/").json()] == ["alice", "bob"]
    bad_role = alice.put("/api/v1/orgs/lab/members/bob", {"role": "owner"}, format="json")
    assert bad_role.status_code == 400 and bad_role.json()["code"] == "invalid"
    nobody = alice.put("/api/v1/orgs/lab/members/nobody", {"role": "read"}, format="json")
    assert nobody.status_code == 404 and nobody.json()["code"] == "not_found"
    # The last admin can neither be demoted nor leave.
    demote = alice.put("/api/v1/orgs/lab/members/alice", {"role": "read"}, format="json")
    assert demote.status_code == 409 and "last admin" in demote.json()["detail"]
    leave = alice.delete("/api/v1/orgs/lab/members/alice")
    assert leave.status_code == 409 and "make another member admin" in leave.json()["detail"]
    assert alice.put("/api/v1/orgs/lab/members/bob", {"role": "admin"}, format="json").status_code == 200
    assert alice.delete("/api/v1/orgs/lab/members/alice").status_code == 204  # now she may leave
    assert bob.delete("/api/v1/orgs/lab/members/bob").status_code == 409  # bob is the last admin now
    lines = [r.getMessage() for r in caplog.records if r.name == "hub.audit"]
    assert "membership lab: bob added as write by alice" in lines
    assert "role lab: bob write -> admin by alice" in lines
    assert "membership lab: alice removed by alice" in lines
    # A read token is refused before anything changes.
    reader = client_for(collaborator, scope="read")
    assert reader.put("/api/v1/orgs/lab/members/mallory", {"role": "read"},
                      format="json").json()["code"] == "insufficient_scope"


def test_writers_publish_into_the_organization_and_readers_are_told_whom_to_ask(lab, owner, collaborator, other):
    services.set_member(lab, collaborator, "read", by="alice")
    alice, bob = client_for(owner), client_for(collaborator)
    made = alice.post("/api/v1/artifacts/", {"kind": "model", "name": "net", "owner": "lab"}, format="json")
    assert made.status_code == 201 and made.json()["full_name"] == "lab/net"
    body = {"files": [multipart_file("w.bin", b"weights")], "metadata": json.dumps(valid_metadata())}
    refused = bob.post("/api/v1/artifacts/lab/net/versions/", body, format="multipart")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert "write role" in refused.json()["detail"] and "ask an admin of lab (alice)" in refused.json()["detail"]
    stranger = client_for(other).post("/api/v1/artifacts/", {"kind": "model", "name": "x", "owner": "lab"},
                                      format="json")
    assert stranger.status_code == 403 and "not a member" in stranger.json()["detail"]
    services.set_member(lab, collaborator, "write", by="alice")
    body = {"files": [multipart_file("w.bin", b"weights")], "metadata": json.dumps(valid_metadata())}
    published = bob.post("/api/v1/artifacts/lab/net/versions/", body, format="multipart")
    assert published.status_code == 201, published.content
    # A writer is not an admin: visibility and deletion stay with the organization's admins.
    patch = bob.patch("/api/v1/artifacts/lab/net/", {"visibility": "private"}, format="json")
    assert patch.status_code == 403 and "admin role" in patch.json()["detail"]
    assert bob.delete("/api/v1/artifacts/lab/net/").status_code == 403
    assert alice.patch("/api/v1/artifacts/lab/net/", {"visibility": "organization"}, format="json").status_code == 200
    # organization visibility needs an organization as owner
    alice.post("/api/v1/artifacts/", {"kind": "model", "name": "mine"}, format="json")
    person = alice.patch("/api/v1/artifacts/alice/mine/", {"visibility": "organization"}, format="json")
    assert person.status_code == 400 and "only an organization's artifact" in person.json()["detail"]


def test_sync_memberships_follows_the_identity_provider_and_keeps_hand_given_rows(lab, owner, collaborator,
                                                                                    make_user):
    other_lab = services.create_organization(owner, "physics")
    services.set_member(other_lab, collaborator, "admin", by="alice")  # by hand: the sync leaves it alone
    made = services.sync_memberships(collaborator, [("lab", "read"), ("lab", "write"), ("physics", "read"),
                                                    ("nowhere", "read")], source="oidc")
    assert sorted((m.org.slug, m.role, m.source) for m in made) == [("lab", "write", "oidc"),
                                                                     ("physics", "admin", "manual")]
    services.sync_memberships(collaborator, [], source="oidc")  # the group was taken away at the IdP
    assert list(Membership.objects.filter(user=collaborator).values_list("org__account__username", "source")) == \
        [("physics", "manual")]
    # The sync never removes an organization's last admin.
    carol = make_user("carol")
    solo = services.create_organization(carol, "solo")
    Membership.objects.filter(org=solo, user=carol).update(source="ldap")
    services.sync_memberships(carol, [], source="ldap")
    assert Membership.objects.get(org=solo, user=carol).role == "admin"
    with pytest.raises(services.HubError):
        services.sync_memberships(carol, [("solo", "owner")], source="ldap")
    assert services.apply_memberships(carol, [("lab", "read")], source="ldap")[0].role == "read"


def test_service_tokens_act_as_the_organization_on_its_artifacts_only(lab, owner, collaborator, anon, caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    services.set_member(lab, collaborator, "write", by="alice")
    owner.set_password("alice-pw-1")
    owner.save()
    collaborator.set_password("bob-pw-1")
    collaborator.save()
    not_admin = anon.post("/api/v1/orgs/lab/tokens/", {"scope": "publish"}, format="json", **basic("bob", "bob-pw-1"))
    assert not_admin.status_code == 403 and "admin role" in not_admin.json()["detail"]
    made = anon.post("/api/v1/orgs/lab/tokens/", {"scope": "publish", "name": "ci"}, format="json",
                     **basic("alice", "alice-pw-1"))
    assert made.status_code == 201 and made.json()["org"] == "lab"
    pipeline = client_for(None)
    pipeline.credentials(HTTP_AUTHORIZATION=f"Bearer {made.json()['token']}")
    assert pipeline.get("/api/v1/me").json()["username"] == "lab"
    created = pipeline.post("/api/v1/artifacts/", {"kind": "model", "name": "nightly", "visibility": "private"},
                            format="json")
    assert created.status_code == 201 and created.json()["full_name"] == "lab/nightly"
    assert pipeline.get("/api/v1/artifacts/lab/nightly/").status_code == 200
    listed = anon.get("/api/v1/orgs/lab/tokens/", **basic("alice", "alice-pw-1")).json()
    assert [t["name"] for t in listed] == ["ci"]
    assert anon.delete(f"/api/v1/orgs/lab/tokens/{listed[0]['id']}",
                       **basic("alice", "alice-pw-1")).status_code == 204
    assert pipeline.get("/api/v1/me").json()["code"] == "invalid_token"
    lines = [r.getMessage() for r in caplog.records if r.name == "hub.audit"]
    assert any(line.startswith("token lab: service token") and "created by alice" in line for line in lines)
    assert any(line.startswith("token lab: service token") and "revoked by alice" in line for line in lines)


def test_hub_token_for_an_organization_makes_a_service_token_limited_to_it(lab, capsys):
    from django.core.management import call_command

    from hub.accounts.models import ApiToken

    call_command("hub_token", "lab", "--scope", "publish")
    raw = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(prefix=raw[:12])
    assert token.user.username == "lab" and token.org == lab and token.scope == "publish"
