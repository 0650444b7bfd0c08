"""Transfer of an artifact between a person and an organization: PIDs keep resolving, the old name redirects
(API and pages), provenance is untouched, and the move is one ``hub.audit`` line."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from hub.orgs import services as orgs
from hub.registry import services
from hub.registry.models import Artifact
from tests.conftest import client_for, staged, valid_metadata

pytestmark = pytest.mark.django_db


def _publish(user, name: str, data: bytes, tmp_path, visibility: str = "public", provenance=()):
    artifact = services.create_artifact(user, kind="model", name=name, visibility=visibility)
    return services.create_version(artifact, user, files=[staged(tmp_path, "w.bin", data)],
                                   metadata=valid_metadata(), provenance=[
                                       services.ProvenanceRef(r, t) for r, t in provenance])


def test_a_person_hands_a_model_to_the_lab_and_every_name_still_leads_there(owner, collaborator, other, tmp_path,
                                                                            caplog):
    caplog.set_level(logging.INFO, logger="hub.audit")
    lab = orgs.create_organization(owner, "lab")
    version = _publish(owner, "net", b"weights", tmp_path)
    derived = _publish(collaborator, "net-tuned", b"tuned", tmp_path, provenance=[("derived_from", version)])
    alice = client_for(owner)
    moved = alice.post("/api/v1/artifacts/alice/net/transfer", {"to": "lab"}, format="json")
    assert moved.status_code == 200 and moved.json()["full_name"] == "lab/net"
    assert moved.json()["pid"] == version.artifact.pid
    anon = client_for(None)
    old = anon.get("/api/v1/artifacts/alice/net/versions/1/?x=1")
    assert old.status_code == 308 and old["Location"] == "/api/v1/artifacts/lab/net/versions/1/?x=1"
    assert anon.get(old["Location"]).json()["pid"] == version.pid
    for pid in (version.pid, version.artifact.pid):
        found = anon.get(f"/{pid}", follow=True, HTTP_ACCEPT="application/json")
        assert found.status_code == 200 and "lab/net" in found.content.decode()
    # provenance untouched: the derivative still names the same version, now under its new name
    source = anon.get("/api/v1/artifacts/bob/net-tuned/versions/1/").json()["provenance"][0]
    assert source["target_pid"] == version.pid and source["target"] == "lab/net@1"
    assert derived.provenance.get().target_id == version.pk
    # the page that names it redirects too, and a write sent to the old name keeps its method
    browser = Client()
    browser.force_login(owner)
    page = browser.post("/sharing/alice/net", {"visibility": "public"})
    assert page.status_code == 308 and page["Location"] == "/sharing/lab/net"
    patch = alice.patch("/api/v1/artifacts/alice/net/", {"title": "t"}, format="json")
    assert patch.status_code == 308 and patch["Location"] == "/api/v1/artifacts/lab/net/"
    assert any(r.getMessage().startswith("transfer alice/net -> lab/net by alice") for r in caplog.records)
    # a new artifact can take the old name: it is then found, not redirected
    _publish(owner, "net", b"other weights", tmp_path)
    assert anon.get("/api/v1/artifacts/alice/net/").json()["pid"] != version.artifact.pid
    assert lab.account.artifacts.filter(name="net").exists()


def test_transfers_are_refused_with_what_to_ask_for(owner, collaborator, other, tmp_path):
    lab = orgs.create_organization(owner, "lab")
    orgs.set_member(lab, collaborator, "write", by="alice")
    _publish(owner, "net", b"weights", tmp_path, visibility="private")
    bob, mallory, alice = client_for(collaborator), client_for(other), client_for(owner)
    hidden = mallory.post("/api/v1/artifacts/alice/net/transfer", {"to": "mallory"}, format="json")
    assert hidden.status_code == 404  # a private artifact's existence does not leak
    _publish(collaborator, "mine", b"bobs", tmp_path)
    not_admin = bob.post("/api/v1/artifacts/bob/mine/transfer", {"to": "nolab"}, format="json")
    assert not_admin.status_code == 404 and not_admin.json()["detail"] == "No organization nolab."
    services.create_artifact(lab.account, kind="model", name="mine")
    clash = bob.post("/api/v1/artifacts/bob/mine/transfer", {"to": "lab"}, format="json")
    assert clash.status_code == 409 and "lab already has an artifact named mine" in clash.json()["detail"]
    outsider = alice.post("/api/v1/artifacts/alice/net/transfer", {"to": "physics"}, format="json")
    assert outsider.status_code == 404
    physics = orgs.create_organization(other, "physics")
    not_member = alice.post("/api/v1/artifacts/alice/net/transfer", {"to": "physics"}, format="json")
    assert not_member.status_code == 403 and "ask an admin of physics: mallory" in not_member.json()["detail"]
    assert physics.account.artifacts.count() == 0
    # organization-only visibility cannot go to a person: back from the lab it becomes private
    alice.post("/api/v1/artifacts/alice/net/transfer", {"to": "lab"}, format="json")
    alice.patch("/api/v1/artifacts/lab/net/", {"visibility": "organization"}, format="json")
    assert bob.get("/api/v1/artifacts/lab/net/").status_code == 200
    writer = bob.post("/api/v1/artifacts/lab/net/transfer", {"to": "bob"}, format="json")
    assert writer.status_code == 403 and "admin role" in writer.json()["detail"]
    back = alice.post("/api/v1/artifacts/lab/net/transfer", {"to": "alice"}, format="json")
    assert back.status_code == 200 and back.json()["visibility"] == "private"
    assert Artifact.objects.get(name="net", owner=owner).visibility == "private"
    assert bob.get("/api/v1/artifacts/alice/net/").status_code == 404  # bob read it as a member, no longer
    assert bob.get("/api/v1/artifacts/lab/net/").status_code == 404  # the old name redirects only for readers
