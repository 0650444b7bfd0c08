"""The privacy matrix (``tests/registry/test_privacy_matrix.py``) over the visibility levels and the roles:
every surface there x {internal, organization, private} x {anonymous, a signed-in stranger, the organization's
read, write and admin members, a collaborator, the organization's service token, limited tokens}, 0 leaks.

The world is the matrix's, with the two secret artifacts owned by the organization ``lab`` at the level under
test: alice (lab's admin) owns the public model and table that name them; carol reads in lab, dave writes,
bob collaborates on both secrets, mallory is a stranger.
"""

from __future__ import annotations

import pytest

from hub.accounts.models import ApiToken
from hub.orgs import services as orgs
from hub.registry.models import Artifact
from tests.conftest import client_for
from tests.registry.test_privacy_matrix import RESTRICTED, World, _holds, _version, surfaces

pytestmark = pytest.mark.django_db

LEVELS = ("internal", "organization", "private")
VIEWERS = ("anonymous", "stranger", "org read", "org write", "org admin", "collaborator", "service token",
           "admin, token limited to lab", "admin, token limited to another artifact", "reader, token limited to lab")
READERS = {
    "internal": set(VIEWERS) - {"anonymous", "admin, token limited to another artifact"},
    "organization": {"org read", "org write", "org admin", "collaborator", "service token",
                     "admin, token limited to lab", "reader, token limited to lab"},
    "private": {"org write", "org admin", "collaborator", "service token", "admin, token limited to lab"},
}


@pytest.fixture
def people(owner, collaborator, other, make_user):
    return {"alice": owner, "bob": collaborator, "mallory": other, "carol": make_user("carol"),
            "dave": make_user("dave")}


def _world(level: str, people, tmp_path) -> World:
    alice, bob = people["alice"], people["bob"]
    lab = orgs.create_organization(alice, "lab")
    orgs.set_member(lab, people["carol"], "read", by="alice")
    orgs.set_member(lab, people["dave"], "write", by="alice")
    secret = _version(lab.account, "secret-data", {"s.csv": b"x,y\n1,2\n"}, kind="dataset", visibility=level,
                      collaborators=[bob], tmp_path=tmp_path)
    seen = _version(alice, "seen-data", {"d.csv": b"x,y\n3,4\n"}, kind="dataset", tmp_path=tmp_path)
    model = _version(alice, "open-model", {"m.bin": b"weights"}, kind="model", tmp_path=tmp_path,
                     provenance=[("trained_on", secret), ("derived_from", seen)])
    table = _version(alice, "open-table", {"t.csv": b"sepal_length,species\n5.1,setosa\n"}, kind="dataset",
                     tmp_path=tmp_path, provenance=[("derived_from", secret)])
    outputs = _version(lab.account, "secret-outputs", {"o.csv": b"x,y\n5,6\n"}, kind="dataset", visibility=level,
                       collaborators=[bob], provenance=[("derived_from", model)], tmp_path=tmp_path)
    return World(secret, outputs, model, table, seen)


def _token_client(user, **limit):
    client = client_for(None)
    _, raw = ApiToken.issue(user, scope="read", **limit)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _clients(people, world: World) -> dict:
    lab = orgs.organization_named("lab")
    return {
        "anonymous": client_for(None), "stranger": client_for(people["mallory"], scope="read"),
        "org read": client_for(people["carol"], scope="read"), "org write": client_for(people["dave"], scope="read"),
        "org admin": client_for(people["alice"]), "collaborator": client_for(people["bob"], scope="read"),
        "service token": _token_client(lab.account, org=lab),
        "admin, token limited to lab": _token_client(people["alice"], org=lab),
        "admin, token limited to another artifact": _token_client(people["alice"], artifact=world.model.artifact),
        "reader, token limited to lab": _token_client(people["carol"], org=lab),
    }


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.parametrize("level", LEVELS)
def test_every_surface_shows_each_level_to_exactly_its_readers(level, people, tmp_path):
    world = _world(level, people, tmp_path)
    clients, secrets, problems = _clients(people, world), world.secrets(), []
    for viewer in VIEWERS:
        client, may_read = clients[viewer], viewer in READERS[level]
        for name, surface in surfaces().items():
            response = surface.fetch(client, world)
            if response.status_code != 200:
                problems.append(f"{viewer} / {name}: status {response.status_code}")
                continue
            text = response.content.decode("utf-8", errors="replace")
            if not may_read or surface.public_view:
                if leaked := [s for s in secrets if s in text]:
                    problems.append(f"{viewer} / {name}: names {leaked}")
                if surface.marker is not None and not _holds(surface.marker, response.content):
                    problems.append(f"{viewer} / {name}: the restricted relation is gone")
            else:
                if "sources" in surface.names and not (world.secret.pid in text and RESTRICTED not in text):
                    problems.append(f"{viewer} / {name}: the source's PID is missing for a reader")
                if "derivatives" in surface.names and not (world.outputs.pid in text and "secret-outputs" in text):
                    problems.append(f"{viewer} / {name}: the derivative is missing for a reader")
    assert not problems, f"{level}: {len(problems)} problems\n" + "\n".join(problems[:60])


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.parametrize("level", LEVELS)
def test_direct_reads_search_and_facet_counts_agree_with_the_level(level, people, tmp_path):
    world = _world(level, people, tmp_path)
    clients = _clients(people, world)
    for viewer in VIEWERS:
        client, may_read = clients[viewer], viewer in READERS[level]
        detail = client.get("/api/v1/artifacts/lab/secret-data/")
        assert detail.status_code == (200 if may_read else 404), viewer
        if not may_read:
            assert detail.json()["code"] == "not_found" and "may not see it" in detail.json()["detail"]
        files = client.get("/api/v1/artifacts/lab/secret-data/versions/1/files/s.csv")
        assert files.status_code == (200 if may_read else 404), viewer
        by_pid = client.get(f"/{world.secret.pid}", follow=True, HTTP_ACCEPT="application/json")
        assert by_pid.status_code == (200 if may_read else 404), viewer
        listed = client.get("/api/v1/artifacts/", {"owner": "lab"}).json()
        names = sorted(a["full_name"] for a in listed["results"])
        assert names == (["lab/secret-data", "lab/secret-outputs"] if may_read else []), viewer
        owners = {f["value"]: f["count"] for f in client.get("/api/v1/artifacts/").json()["facets"]["owner"]}
        assert owners.get("lab", 0) == (2 if may_read else 0), viewer
        leveled = client.get("/api/v1/artifacts/", {"visibility": level}).json()
        assert leveled["count"] == (2 if may_read else 0), viewer


@pytest.mark.slow
@pytest.mark.cpu  # every write surface: over 1 s on a quiet machine
def test_a_limited_token_writes_nothing_outside_its_limit(people, tmp_path):
    world = _world("organization", people, tmp_path)
    alice, lab = people["alice"], orgs.organization_named("lab")
    in_lab = client_for(None)
    _, raw = ApiToken.issue(alice, scope="admin", org=lab)
    in_lab.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    outside = in_lab.patch("/api/v1/artifacts/alice/open-model/", {"title": "changed"}, format="json")
    assert outside.status_code == 403 and outside.json()["code"] == "insufficient_scope"
    assert "limited to organization lab" in outside.json()["detail"]
    mine = in_lab.post("/api/v1/artifacts/", {"kind": "model", "name": "elsewhere"}, format="json")
    assert mine.status_code == 403 and mine.json()["code"] == "insufficient_scope"
    assert in_lab.patch("/api/v1/artifacts/lab/secret-data/", {"title": "ok"}, format="json").status_code == 200
    one = client_for(None)
    _, raw = ApiToken.issue(alice, scope="publish", artifact=world.model.artifact)
    one.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert one.patch("/api/v1/artifacts/alice/open-model/", {"title": "ok"}, format="json").status_code == 200
    assert one.patch("/api/v1/artifacts/alice/open-table/", {"title": "no"},
                     format="json").json()["code"] == "insufficient_scope"
    assert one.post("/api/v1/orgs/", {"name": "newlab"}, format="json").json()["code"] == "insufficient_scope"
    # publish is not admin: visibility stays out of its reach even on its own artifact
    admin_only = one.patch("/api/v1/artifacts/alice/open-model/", {"visibility": "internal"}, format="json")
    assert admin_only.status_code == 403 and admin_only.json()["code"] == "insufficient_scope"
    assert Artifact.objects.get(name="open-model").visibility == "public"
    # infer may run a model but not publish
    infer = client_for(alice, scope="infer")
    refused = infer.post("/api/v1/artifacts/", {"kind": "model", "name": "nope"}, format="json")
    assert refused.status_code == 403 and "needs 'publish'" in refused.json()["detail"]
    # the old scopes keep working as they did: write does everything, read nothing unsafe
    old = client_for(alice, scope="write")
    changed = old.patch("/api/v1/artifacts/alice/open-model/", {"visibility": "internal"}, format="json")
    assert changed.status_code == 200
    assert client_for(alice, scope="read").patch("/api/v1/artifacts/alice/open-model/", {"title": "x"},
                                                 format="json").json()["code"] == "insufficient_scope"
