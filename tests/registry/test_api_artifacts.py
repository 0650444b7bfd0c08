"""Artifacts over the API, and the authorisation matrix."""

from __future__ import annotations

import pytest

from hub.registry.models import Artifact
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def test_create_list_and_read(api, anon):
    response = api.post("/api/v1/artifacts/", {"kind": "model", "name": "resnet-tiny", "title": "Tiny ResNet",
                                               "description": "A small CNN."}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["full_name"] == "alice/resnet-tiny"
    assert body["pid"].startswith("ark:/99999/fk4")
    assert body["latest_version"] is None
    listing = anon.get("/api/v1/artifacts/", {"q": "tiny", "kind": "model"}).json()
    assert [a["full_name"] for a in listing["results"]] == ["alice/resnet-tiny"]
    assert anon.get("/api/v1/artifacts/", {"kind": "dataset"}).json()["count"] == 0
    assert anon.get("/api/v1/artifacts/alice/resnet-tiny/").json()["title"] == "Tiny ResNet"


def test_duplicate_name_is_409_and_name_is_reusable_after_delete(api):
    assert api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "d"}, format="json").status_code == 201
    again = api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "d"}, format="json")
    assert again.status_code == 409 and again["X-Error-Code"] == "already_exists"
    assert api.delete("/api/v1/artifacts/alice/d/").status_code == 204
    assert api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "d"}, format="json").status_code == 201
    assert Artifact.objects.filter(name="d").count() == 2


@pytest.mark.parametrize("body, field", [
    ({"kind": "robot", "name": "x"}, "kind"),
    ({"kind": "model", "name": "../etc"}, "name"),
    ({"kind": "model", "name": "x", "visibility": "secret"}, "visibility"),
    ({"kind": "model", "name": "x", "collaborators": ["nobody-here"]}, "collaborators"),
    ({"name": "x"}, "kind"),
])
def test_invalid_artifacts_name_the_field(api, body, field):
    response = api.post("/api/v1/artifacts/", body, format="json")
    assert response.status_code == 400
    data = response.json()
    assert data["code"] == "invalid" and response["X-Error-Code"] == "invalid"
    assert field in data["errors"], data
    assert data["request_id"]


def test_patch_rules(owner, collaborator, other, publish):
    publish(owner, "m", collaborators=[collaborator])
    as_collab = client_for(collaborator)
    assert as_collab.patch("/api/v1/artifacts/alice/m/", {"description": "better"}, format="json").status_code == 200
    refused = as_collab.patch("/api/v1/artifacts/alice/m/", {"visibility": "private"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert client_for(other).patch("/api/v1/artifacts/alice/m/", {"title": "x"}, format="json").status_code == 403
    as_owner = client_for(owner)
    done = as_owner.patch("/api/v1/artifacts/alice/m/", {"visibility": "private", "collaborators": []}, format="json")
    assert done.status_code == 200 and done.json()["visibility"] == "private"
    assert client_for(collaborator).get("/api/v1/artifacts/alice/m/").status_code == 404


# --- the authorisation matrix: {anonymous, other, collaborator, owner} x {public, private} x endpoint ---

ROLES = ["anonymous", "other", "collaborator", "owner"]
READS = [
    ("get", "/api/v1/artifacts/alice/{name}/"),
    ("get", "/api/v1/artifacts/alice/{name}/versions/"),
    ("get", "/api/v1/artifacts/alice/{name}/versions/latest/"),
    ("get", "/api/v1/artifacts/alice/{name}/versions/1/files/weights.bin"),
    ("get", "/{pid}"),
]


@pytest.fixture
def world(owner, other, collaborator, publish):
    public_artifact, public_version = publish(owner, "pub", {"weights.bin": b"public-bytes"},
                                              collaborators=[collaborator])
    private_artifact, private_version = publish(owner, "priv", {"weights.bin": b"private-bytes"},
                                                visibility="private", collaborators=[collaborator])
    users = {"anonymous": None, "other": other, "collaborator": collaborator, "owner": owner}
    return {"public": public_artifact, "private": private_artifact, "users": users}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("visibility", ["public", "private"])
def test_read_matrix(world, role, visibility):
    artifact = world[visibility]
    client = client_for(world["users"][role])
    allowed = visibility == "public" or role in ("collaborator", "owner")
    for method, template in READS:
        url = template.format(name=artifact.name, pid=artifact.pid)
        response = getattr(client, method)(url, follow=True)  # a PID answers 303 to its landing page
        assert response.status_code == (200 if allowed else 404), (role, visibility, url, response.status_code)
    names = {a["name"] for a in client.get("/api/v1/artifacts/").json()["results"]}
    assert (artifact.name in names) == allowed


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("visibility", ["public", "private"])
def test_write_matrix(world, role, visibility, tmp_path):
    artifact = world[visibility]
    client = client_for(world["users"][role])
    base = f"/api/v1/artifacts/alice/{artifact.name}/"
    hidden = visibility == "private" and role in ("anonymous", "other")
    expected_write = 401 if role == "anonymous" else 404 if hidden else 403 if role == "other" else 201
    response = client.post(base + "versions/", {"files": [], "metadata": {}}, format="json")
    if expected_write == 201:  # allowed: refused only for the empty file list
        assert response.status_code == 400 and response.json()["code"] == "invalid"
    else:
        assert response.status_code == expected_write, (role, visibility, response.content)
    expected_admin = {"anonymous": 401, "other": 404 if hidden else 403, "collaborator": 403, "owner": 204}[role]
    assert client.delete(base + "versions/1/").status_code == expected_admin
    assert client.delete(base).status_code == expected_admin


def test_read_token_cannot_write(owner):
    client = client_for(owner, scope="read")
    response = client.post("/api/v1/artifacts/", {"kind": "model", "name": "x"}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "insufficient_scope"
    assert client.get("/api/v1/artifacts/").status_code == 200
