"""The protocol's answers as bytes and headers (the logic tier: Django's test client): what ``huggingface_hub``
reads from a HEAD and a GET of ``resolve`` (``X-Repo-Commit``, ``ETag`` = sha256, ``Content-Length``, Range),
its error codes and the hub's coded body beside them; and, on the S3 backend through the real client, the
redirect to a presigned URL with ``X-Linked-Etag``/``X-Linked-Size``."""

from __future__ import annotations

import hashlib
import os

import pytest
from rest_framework.test import APIClient

from hub.hfhub.revisions import commit_sha, split_revision
from tests.conftest import client_for
from tests.hfhub.conftest import token_for

pytestmark = pytest.mark.django_db

DATA = os.urandom(1000)


@pytest.fixture
def model(owner, publish):
    return publish(owner, "model", {"w.bin": DATA, "a/b.txt": b"b"})[1]


def test_head_and_get_of_resolve_carry_what_the_client_reads(model, anon):
    sha = hashlib.sha256(DATA).hexdigest()
    head = anon.head("/alice/model/resolve/main/w.bin", HTTP_ACCEPT_ENCODING="identity")
    assert head.status_code == 200 and head.content == b""
    assert head["X-Repo-Commit"] == commit_sha(model) and head["ETag"] == f'"{sha}"'
    assert head["Content-Length"] == "1000" and head["Accept-Ranges"] == "bytes"
    got = anon.get("/alice/model/resolve/1/w.bin", HTTP_RANGE="bytes=100-199")
    assert got.status_code == 206 and b"".join(got.streaming_content) == DATA[100:200]
    assert got["Content-Range"] == "bytes 100-199/1000" and got["X-Repo-Commit"] == commit_sha(model)
    assert anon.get("/alice/model/resolve/1/w.bin", HTTP_IF_NONE_MATCH=f'"{sha}"').status_code == 304
    whole = anon.get(f"/alice/model/resolve/{commit_sha(model)}/a/b.txt")
    assert b"".join(whole.streaming_content) == b"b"
    model.artifact.refresh_from_db()
    assert model.artifact.downloads == 1  # the whole file; neither the HEAD, the range from 100 nor the 304


@pytest.mark.parametrize(("path", "status", "code"), [
    ("/alice/model/resolve/1/missing.bin", 404, "EntryNotFound"),
    ("/alice/model/resolve/7/w.bin", 404, "RevisionNotFound"),
    ("/alice/nothing/resolve/main/w.bin", 401, "RepoNotFound"),
    ("/datasets/alice/model/resolve/main/w.bin", 401, "RepoNotFound"),  # a model is no dataset
    ("/api/models/alice/model/revision/7", 404, "RevisionNotFound"),
    ("/api/models/alice/model/tree/1/nowhere", 404, "EntryNotFound"),
    ("/api/spaces/alice/model/refs", 401, "RepoNotFound"),
])
def test_errors_are_the_hubs_coded_bodies_with_the_codes_the_client_reads(model, anon, path, status, code):
    response = anon.get(path)
    assert response.status_code == status and response["X-Error-Code"] == code
    body = response.json()
    assert body["code"] == code and body["error"] == body["detail"] and body["detail"]
    assert response["X-Error-Message"] == body["detail"][:500]
    if code in ("EntryNotFound",):  # the client caches a missing file under the commit it was missing from
        assert response["X-Repo-Commit"] == commit_sha(model)


def test_a_signed_in_reader_gets_404_for_what_an_anonymous_one_gets_401(model, other):
    response = client_for(other, "read").get("/api/models/alice/nothing")
    assert response.status_code == 404 and response["X-Error-Code"] == "RepoNotFound"


def test_paths_info_is_a_read_for_any_token_scope(model, other):
    response = client_for(other, "read").post("/api/models/alice/model/paths-info/1",
                                              {"paths": ["w.bin", "a", "zz"], "expand": "true"})
    assert response.status_code == 200
    assert [(e["path"], e["type"]) for e in response.json()] == [("w.bin", "file"), ("a", "directory")]
    assert response.json()[0]["lastCommit"]["id"] == commit_sha(model)
    refused = client_for(other, "read").post("/api/models/alice/model/paths-info/1", {"paths": [["x"]]},
                                             format="json")
    assert refused.status_code == 400 and refused["X-Error-Code"] == "invalid"


@pytest.mark.slow
@pytest.mark.cpu  # resolves every route: over 1 s on a quiet machine
def test_the_routes_shadow_none_of_the_hubs_own(model, anon):
    assert anon.get("/api/v1/artifacts/alice/model/").status_code == 200
    assert anon.get("/api/v1/artifacts/alice/model/versions/1/files/w.bin").status_code == 200
    assert anon.get("/api/schema/").status_code == 200
    schema = anon.get("/api/schema/").content.decode()
    assert "/api/models/" not in schema and "paths-info" not in schema  # the protocol is not the REST API
    assert anon.get("/owners/alice/").status_code == 200


def test_a_revision_keeps_the_segments_of_a_pid_and_of_refs():
    assert split_revision("1.0/a/b.json") == ("1.0", "a/b.json")
    assert split_revision("ark:/99999/fk4abc/a/b.json") == ("ark:/99999/fk4abc", "a/b.json")
    assert split_revision("ark:99999/fk4abc") == ("ark:99999/fk4abc", "")
    assert split_revision("refs/convert/parquet/x") == ("refs/convert/parquet", "x")


DOWNLOAD_S3 = r"""
import hashlib, requests
from huggingface_hub import hf_hub_download, snapshot_download

head = requests.head(f"{ENDPOINT}/alice/on-s3/resolve/main/w.bin",
                     headers={"Authorization": f"Bearer {ARGS['bearer']}"})
path = hf_hub_download("alice/on-s3", "w.bin")
snapshot = snapshot_download("alice/on-s3", local_dir="snap")
print(json.dumps({"status": head.status_code, "headers": {k: head.headers.get(k) for k in (
    "X-Linked-Etag", "X-Linked-Size", "X-Repo-Commit", "Location")}, "file": hashlib.sha256(open(path, "rb").read())
    .hexdigest(), "snapshot": hashlib.sha256(open(snapshot + "/w.bin", "rb").read()).hexdigest()}))
"""


@pytest.mark.django_db(transaction=True)
def test_on_s3_the_client_follows_a_presigned_redirect_with_the_linked_headers(s3, owner, publish, hf_client,
                                                                                 live_server):
    data = os.urandom(300_000)
    _, version = publish(owner, "on-s3", {"w.bin": data}, visibility="private")
    token = token_for(owner)
    out = hf_client(DOWNLOAD_S3, token=token, bearer=token)
    sha = hashlib.sha256(data).hexdigest()
    assert out["status"] == 302
    assert out["headers"]["X-Linked-Etag"] == f'"{sha}"' and out["headers"]["X-Linked-Size"] == str(len(data))
    assert out["headers"]["X-Repo-Commit"] == commit_sha(version)
    assert not out["headers"]["Location"].startswith(live_server.url)  # the object store's own URL
    assert out["file"] == out["snapshot"] == sha


# --- the write side's refusals -------------------------------------------------------------------------------


def test_write_routes_refuse_a_private_artifact_as_missing_and_a_read_token_as_such(owner, other, publish):
    publish(owner, "hidden", {"w.bin": b"hidden"}, visibility="private")
    routes = [("/api/models/alice/hidden/preupload/main", {"files": [{"path": "a", "size": 1, "sample": ""}]}),
              ("/api/models/alice/hidden/commit/main", None),
              ("/alice/hidden.git/info/lfs/objects/batch", {"operation": "upload", "objects": []})]
    mallory, reader = client_for(other, "write"), client_for(owner, "read")
    for path, body in routes:
        refused = mallory.post(path, body or {}, format="json")
        missing = mallory.post(path.replace("hidden", "never-was"), body or {}, format="json")
        assert (refused.status_code, refused["X-Error-Code"]) == (404, "RepoNotFound") == (
            missing.status_code, missing["X-Error-Code"]), path
        scoped = reader.post(path, body or {}, format="json")
        assert (scoped.status_code, scoped["X-Error-Code"]) == (403, "insufficient_scope"), path
        assert client_for(None).post(path, body or {}, format="json").status_code == 401, path


def _signed_upload(owner, data: bytes, size: int | None = None) -> str:
    from django.test import RequestFactory

    from hub.hfhub import lfs

    oid = hashlib.sha256(data).hexdigest()
    answer = lfs.batch(RequestFactory().post("/"), owner, {"operation": "upload", "objects": [
        {"oid": oid, "size": len(data) if size is None else size}]})
    return answer["objects"][0]["actions"]["upload"]["href"].removeprefix("http://testserver")


def test_an_lfs_upload_is_checked_against_its_signed_sha256_and_size(owner, anon, settings):
    from hub.registry.models import Blob
    from hub.storage import get_blob_store

    data = os.urandom(2048)
    oid = hashlib.sha256(data).hexdigest()
    url = _signed_upload(owner, data)
    forged = url.split("?sig=")[0] + "?sig=" + url.split("?sig=")[1][::-1]
    assert anon.put(forged, data, content_type="application/octet-stream")["X-Error-Code"] == "invalid_token"
    other = _signed_upload(owner, b"other bytes")
    assert anon.put(other.replace(other.split("/")[3].split("?")[0], oid), data,
                    content_type="application/octet-stream")["X-Error-Code"] == "invalid_token"
    short = anon.put(url, data[:100], content_type="application/octet-stream")
    assert (short.status_code, short["X-Error-Code"]) == (400, "upload_size_mismatch")
    wrong = anon.put(url, os.urandom(2048), content_type="application/octet-stream")
    assert (wrong.status_code, wrong["X-Error-Code"]) == (400, "checksum_mismatch")
    assert not get_blob_store().exists(oid) and not Blob.objects.filter(sha256=oid).exists()
    from pathlib import Path

    assert not list(Path(settings.HUB_UPLOAD_DIR).glob("hf-lfs-*"))  # nothing half-written stays
    assert anon.put(url, data, content_type="application/octet-stream").status_code == 200
    assert get_blob_store().exists(oid) and Blob.objects.get(sha256=oid).size == 2048
    from hub.registry.models import Upload

    kept = Upload.objects.get(sha256=oid)  # the person's completed upload: the collector keeps the blob for it
    assert kept.owner == owner and kept.state == "completed" and kept.size == 2048
    from django.test import RequestFactory

    from hub.hfhub import lfs

    held = lfs.batch(RequestFactory().post("/"), owner, {"operation": "upload", "objects": [
        {"oid": oid, "size": 2048}, {"oid": "nope", "size": 1}]})["objects"]
    assert held[0] == {"oid": oid, "size": 2048} and "error" in held[1]  # held: no upload action, so no upload


@pytest.mark.parametrize(("lines", "code"), [
    (b"not json\n", "malformed_request"),
    (b'{"key": "header", "value": {"summary": "x"}}\n{"key": "rename", "value": {}}\n', "malformed_request"),
    (b'{"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256", "oid": "' + b"0" * 64 + b'"}}\n',
     "upload_incomplete"),
    (b'{"key": "file", "value": {"path": "a.txt", "content": "%%%", "encoding": "base64"}}\n', "malformed_request"),
    (b'{"key": "file", "value": {"path": "../up.txt", "content": "eA==", "encoding": "base64"}}\n', "invalid_path"),
    (b'{"key": "deletedFile", "value": {"path": "not-there.bin"}}\n', "EntryNotFound"),
])
def test_a_malformed_commit_is_a_coded_4xx_and_publishes_nothing(owner, publish, lines, code, settings):
    from pathlib import Path

    artifact, _ = publish(owner, "target", {"w.bin": b"w"})
    response = client_for(owner).generic("POST", "/api/models/alice/target/commit/main", lines,
                                         content_type="application/x-ndjson")
    assert 400 <= response.status_code < 500 and response["X-Error-Code"] == code, response.content
    assert artifact.versions.count() == 1
    assert not list(Path(settings.HUB_UPLOAD_DIR).glob("hf-*.part"))


def test_lfs_objects_still_to_come_count_against_the_owners_quota(owner, publish, settings):
    settings.HUB_USER_STORAGE_MB = 1
    publish(owner, "quota", {"w.bin": b"w"})
    api = client_for(owner)
    too_big = api.post("/alice/quota.git/info/lfs/objects/batch", {"operation": "upload", "objects": [
        {"oid": "a" * 64, "size": 2 * 1024 * 1024}]}, format="json")
    assert (too_big.status_code, too_big["X-Error-Code"]) == (403, "storage_quota")
    fits = api.post("/alice/quota.git/info/lfs/objects/batch", {"operation": "upload", "objects": [
        {"oid": "b" * 64, "size": 1000}]}, format="json")
    assert fits.status_code == 200 and fits.json()["objects"][0]["actions"]["upload"]["href"]


@pytest.mark.parametrize("body", [{"name": "x", "type": ["model"]}, {"name": "../x"}, {"name": 3},
                                  {"name": "x", "type": "kernel"}, [1, 2]])
def test_create_repo_refuses_malformed_requests_with_a_code(owner, body):
    response = client_for(owner).post("/api/repos/create", body, format="json")
    assert response.status_code in (400,) and response["X-Error-Code"] in ("invalid", "malformed_request")


def test_nobody_commits_or_learns_of_bytes_by_naming_their_digest(owner, other, publish):
    """mallory knows the sha256 of alice's private file: the batch still asks her for the bytes (it tells her
    nothing of what is stored), and a commit that only names the digest is refused."""
    secret = os.urandom(300)
    oid = hashlib.sha256(secret).hexdigest()
    publish(owner, "private-weights", {"w.bin": secret}, visibility="private")
    publish(other, "mine", {"m.bin": b"mallory's"})
    mallory = client_for(other)
    answer = mallory.post("/mallory/mine.git/info/lfs/objects/batch", {"operation": "upload", "objects": [
        {"oid": oid, "size": 300}]}, format="json").json()
    assert answer["objects"][0]["actions"]["upload"]["href"]
    line = b'{"key": "lfsFile", "value": {"path": "stolen.bin", "algo": "sha256", "oid": "%s", "size": 300}}\n'
    refused = mallory.generic("POST", "/api/models/mallory/mine/commit/main", line % oid.encode(),
                              content_type="application/x-ndjson")
    assert (refused.status_code, refused["X-Error-Code"]) == (400, "upload_incomplete")
    held = client_for(owner).post("/alice/private-weights.git/info/lfs/objects/batch", {
        "operation": "upload", "objects": [{"oid": oid, "size": 300}]}, format="json").json()
    assert "actions" not in held["objects"][0]  # alice holds them: nothing to send again


def test_create_repo_in_an_organization_follows_its_roles_and_a_tokens_limit(owner, collaborator, other):
    """``create_repo("lab/x")``: an organization's writers create under it, as through the REST API; a reader of
    it, an outsider and a token limited to another organization are refused with a code; a token limited to the
    organization creates inside it."""
    from hub.accounts.models import ApiToken
    from hub.orgs import services as orgs
    from hub.orgs.models import Membership, Role
    from hub.registry.models import Artifact

    lab = orgs.create_organization(owner, "lab")
    elsewhere = orgs.create_organization(owner, "elsewhere")
    Membership.objects.create(org=lab, user=collaborator, role=Role.READ)
    made = client_for(owner).post("/api/repos/create", {"name": "net", "organization": "lab", "type": "model",
                                                        "private": True}, format="json")
    assert made.status_code == 200, made.content
    assert made.json()["name"] == "lab/net" and made.json()["url"].endswith("/lab/net")
    artifact = Artifact.objects.live().get(owner=lab.account, name="net")
    assert artifact.visibility == "private"
    again = client_for(owner).post("/api/repos/create", {"name": "net", "organization": "lab"}, format="json")
    assert again.status_code == 409 and again.json()["url"].endswith("/lab/net")
    for user in (collaborator, other):
        refused = client_for(user).post("/api/repos/create", {"name": "x", "organization": "lab"}, format="json")
        assert refused.status_code in (403, 404) and refused["X-Error-Code"] in ("permission_denied", "not_found")
    _, limited = ApiToken.issue(owner, scope="publish", org=elsewhere)
    outside = APIClient()
    outside.credentials(HTTP_AUTHORIZATION=f"Bearer {limited}")
    refused = outside.post("/api/repos/create", {"name": "y", "organization": "lab"}, format="json")
    assert refused.status_code == 403 and refused["X-Error-Code"] == "insufficient_scope"
    inside = outside.post("/api/repos/create", {"name": "y", "organization": "elsewhere"}, format="json")
    assert inside.status_code == 200 and inside.json()["name"] == "elsewhere/y"
    assert not Artifact.objects.live().filter(name__in=["x"]).exists()


def test_the_full_ref_names_the_refs_list_gives_are_revisions(model, anon):
    """``list_repo_refs`` names ``refs/heads/main`` and ``refs/tags/<label>``: each reads as its short name does
    (the client quotes the slashes)."""
    refs = anon.get("/api/models/alice/model/refs").json()
    sha = commit_sha(model)
    for ref in (refs["branches"][0]["ref"], refs["tags"][0]["ref"]):
        info = anon.get(f"/api/models/alice/model/revision/{ref.replace('/', '%2F')}")
        assert info.status_code == 200 and info.json()["sha"] == sha, ref
        got = anon.get(f"/alice/model/resolve/{ref.replace('/', '%2F')}/w.bin")
        assert got.status_code == 200 and got.getvalue() == DATA and got["X-Repo-Commit"] == sha
    missing = anon.get("/api/models/alice/model/revision/refs%2Ftags%2F9.9")
    assert (missing.status_code, missing["X-Error-Code"]) == (404, "RevisionNotFound")


@pytest.mark.parametrize("method, path", [
    ("delete", "/api/repos/delete"), ("post", "/api/repos/move"), ("put", "/api/models/alice/model/settings"),
    ("post", "/api/models/alice/model/tag/main"), ("delete", "/api/models/alice/model/tag/v1"),
    ("post", "/api/datasets/alice/model/branch/dev"), ("delete", "/api/models/alice/model/branch/dev")])
def test_repository_operations_the_hub_does_not_offer_say_what_to_do_instead(model, owner, method, path):
    """``delete_repo``, ``move_repo``, ``update_repo_settings``, ``create_tag``/``delete_tag``, ``create_branch``/
    ``delete_branch``: a coded 400 whose message the client shows (``error``, ``X-Error-Message``), not a page's
    CSRF refusal or a bare 404; nothing changes."""
    response = getattr(client_for(owner), method)(path, {"name": "model", "organization": "alice"}, format="json")
    assert (response.status_code, response["X-Error-Code"]) == (400, "invalid"), response.content
    assert response.json()["error"] == response.json()["detail"] and response["X-Error-Message"]
    assert any(word in response.json()["detail"] for word in ("/api/v1/artifacts/", "label", "main"))
    assert client_for(owner).get("/api/models/alice/model").json()["sha"] == commit_sha(model)


def test_whoami_names_the_organizations_and_roles_of_the_tokens_person(owner):
    from hub.orgs import services as orgs

    orgs.create_organization(owner, "lab", "The Lab")
    me = client_for(owner, scope="read").get("/api/whoami-v2").json()
    assert me["name"] == "alice" and me["auth"]["accessToken"]["role"] == "read"
    assert me["orgs"] == [{"type": "org", "name": "lab", "fullname": "The Lab", "roleInOrg": "admin"}]


def test_after_a_transfer_the_former_name_redirects_on_the_protocol_too(model, owner, other, anon, publish):
    """alice/model handed to lab: ``model_info``, the tree and ``resolve`` under the old name are a 308 to the new
    one (huggingface_hub follows a redirect on the same host) for who may read it; a private artifact's old name
    stays RepoNotFound to others, as a missing one is."""
    from hub.orgs import services as orgs
    from hub.registry.handover import transfer

    transfer(model.artifact, orgs.create_organization(owner, "lab").account, by="alice")
    for path, new in [("/api/models/alice/model", "/api/models/lab/model"),
                      ("/api/models/alice/model/tree/main?recursive=1", "/api/models/lab/model/tree/main?recursive=1"),
                      ("/alice/model/resolve/main/w.bin", "/lab/model/resolve/main/w.bin")]:
        moved = anon.get(path)
        assert (moved.status_code, moved["Location"]) == (308, new), path
        assert anon.get(new).status_code == 200
    assert anon.head("/alice/model/resolve/main/w.bin")["Location"] == "/lab/model/resolve/main/w.bin"
    _, hidden = publish(owner, "hidden", {"h.bin": b"h"}, visibility="private")
    transfer(hidden.artifact, orgs.organization_named("lab").account, by="alice")
    for client in (anon, client_for(other)):
        refused = client.get("/api/models/alice/hidden")
        assert refused.status_code in (401, 404) and refused["X-Error-Code"] == "RepoNotFound"
        assert "Location" not in refused
    assert client_for(owner).get("/alice/hidden/resolve/main/h.bin")["Location"] == "/lab/hidden/resolve/main/h.bin"


def test_listings_are_what_the_asker_may_read_of_the_kind_through_the_search(owner, other, publish, anon,
                                                                              monkeypatch):
    """``list_models``/``list_datasets``/``list_spaces``: the kind's artifacts the asker may read (a private one
    only to its owner), by author and words, in pages linked by ``Link``; a filter this hub lacks is a coded 400."""
    from hub.hfhub import views

    publish(owner, "alpha-net", {"a.bin": b"a"})
    publish(owner, "beta-net", {"b.bin": b"b"})
    publish(owner, "secret-net", {"s.bin": b"s"}, visibility="private")
    publish(other, "gamma-net", {"g.bin": b"g"})
    publish(owner, "table", {"t.csv": b"x,y\n1,2\n"}, kind="dataset")

    def ids(client, url, **params):
        response = client.get(url, params)
        assert response.status_code == 200, response.content
        return sorted(item["id"] for item in response.json())

    assert ids(anon, "/api/models") == ["alice/alpha-net", "alice/beta-net", "mallory/gamma-net"]
    assert ids(client_for(owner), "/api/models", author="alice") == [
        "alice/alpha-net", "alice/beta-net", "alice/secret-net"]
    assert ids(client_for(other), "/api/models", author="alice") == ["alice/alpha-net", "alice/beta-net"]
    assert ids(anon, "/api/models", search="alpha") == ["alice/alpha-net"]
    assert ids(anon, "/api/datasets") == ["alice/table"] and ids(anon, "/api/spaces") == []
    one = anon.get("/api/models", {"search": "alpha"}).json()[0]
    info = anon.get("/api/models/alice/alpha-net").json()
    assert {k: one[k] for k in ("_id", "sha", "private", "lastModified", "author")} == {
        k: info[k] for k in ("_id", "sha", "private", "lastModified", "author")}
    monkeypatch.setattr(views, "LIST_PAGE", 2)
    first = anon.get("/api/models", {"sort": "id"})
    second = anon.get(first["Link"].split(";")[0].strip("<>"))
    assert [i["id"] for i in first.json() + second.json()] == ["alice/alpha-net", "alice/beta-net", "mallory/gamma-net"]
    assert "Link" not in second
    refused = anon.get("/api/models", {"gated": "true"})
    assert (refused.status_code, refused["X-Error-Code"]) == (400, "invalid") and "gated" in refused.json()["error"]
    assert anon.get("/api/models", {"limit": "-1"}).status_code == 400


def test_restricted_or_embargoed_files_make_the_repository_gated(model, owner, anon):
    """``model_info(...).gated`` says what ``hf_hub_download`` will meet: "manual" while the version's files are
    restricted or embargoed (the download is ``GatedRepo``), False once they are open."""
    from datetime import timedelta

    from django.utils import timezone

    assert anon.get("/api/models/alice/model").json()["gated"] is False
    for state, until in (("restricted", None), ("embargoed", timezone.now() + timedelta(days=3))):
        model.files_access, model.embargo_until = state, until
        model.save(update_fields=["files_access", "embargo_until"])
        assert anon.get("/api/models/alice/model").json()["gated"] == "manual", state
        refused = anon.get("/alice/model/resolve/main/w.bin")
        assert (refused.status_code, refused["X-Error-Code"]) == (403, "GatedRepo")
    model.embargo_until = timezone.now() - timedelta(seconds=1)  # the embargo is over: open
    model.save(update_fields=["embargo_until"])
    assert anon.get("/api/models/alice/model").json()["gated"] is False
