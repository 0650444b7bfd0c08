"""Versions: multipart and upload-based creation, immutability, uniqueness, tombstones, downloads."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from django.test import Client
from urllib3 import encode_multipart_formdata

from hub.registry.models import Blob, File, Upload, Version
from hub.registry.uploads import upload_dir
from hub.storage import get_blob_store
from tests.conftest import client_for, multipart_file, staged, valid_metadata

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(api):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": "cnn"}, format="json").status_code == 201
    return "/api/v1/artifacts/alice/cnn/"


def post_files(api, url, files: dict[str, bytes], **fields):
    fields.setdefault("metadata", valid_metadata())
    data = {key: json.dumps(value) if not isinstance(value, str) else value for key, value in fields.items()}
    data["files"] = [multipart_file(name, content) for name, content in files.items()]
    return api.post(url + "versions/", data, format="multipart")


def upload(api, data: bytes) -> str:
    opened = api.post("/api/v1/uploads/", {"size": len(data), "filename": "x"}, format="json").json()
    api.generic("PUT", f"/api/v1/uploads/{opened['id']}", data, content_type="application/octet-stream",
                HTTP_CONTENT_RANGE=f"bytes 0-{len(data) - 1}/{len(data)}")
    done = api.post(f"/api/v1/uploads/{opened['id']}/complete", {"sha256": hashlib.sha256(data).hexdigest()},
                    format="json")
    assert done.status_code == 200, done.content
    return opened["id"]


def test_multipart_version_streams_files_into_the_store(backend, api, model):
    weights, card = os.urandom(100_000), b"# CNN\n"
    response = post_files(api, model, {"model.pt": weights, "README.md": card},
                          metadata=valid_metadata(title="CNN"), version="1.0")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["version"] == "1.0" and body["pid"].startswith("ark:/")
    assert body["metadata"]["framework"] == "pytorch"
    files = {f["path"]: f for f in body["files"]}
    assert files["model.pt"]["sha256"] == hashlib.sha256(weights).hexdigest()
    assert files["model.pt"]["size"] == len(weights) and files["README.md"]["media_type"] == "text/markdown"
    assert get_blob_store().exists(files["model.pt"]["sha256"])
    assert api.get(model).json()["latest_version"] == "1.0"


def test_version_from_completed_uploads_with_provenance(backend, api, model, owner, publish):
    _, dataset_version = publish(owner, "train-set", {"data.csv": b"a,b\n1,2\n"}, kind="dataset")
    upload_id = upload(api, b"onnx bytes" * 1000)
    response = api.post(model + "versions/", {
        "metadata": valid_metadata(), "files": [{"path": "model/model.onnx", "upload": upload_id}],
        "provenance": [{"relation": "trained_on", "target": dataset_version.pid},
                       {"relation": "derived_from", "target": "alice/train-set@1"}],
    }, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["version"] == "1"  # labels default to the next integer
    assert [p["relation"] for p in body["provenance"]] == ["trained_on", "derived_from"]
    assert Upload.objects.get(pk=upload_id).state == Upload.State.CONSUMED
    derived = api.get("/api/v1/artifacts/alice/train-set/versions/1/").json()["derivatives"]
    assert derived[0]["version_pid"] == body["pid"]
    reused = api.post(model + "versions/", {"metadata": valid_metadata(),
                                            "files": [{"path": "again.onnx", "upload": upload_id}]}, format="json")
    assert reused.status_code == 409 and reused.json()["code"] == "upload_not_open"


def test_identical_files_are_refused_with_the_existing_pid(backend, api, model, owner):
    first = post_files(api, model, {"a.bin": b"same bytes", "b.bin": b"other"}).json()
    blobs_before = Blob.objects.count()
    again = post_files(api, model, {"renamed.bin": b"same bytes", "b2.bin": b"other"})
    assert again.status_code == 409
    body = again.json()
    assert body["code"] == "duplicate_version" and body["existing_pid"] == first["pid"]
    assert first["pid"] in body["detail"]
    assert Version.objects.count() == 1 and Blob.objects.count() == blobs_before  # nothing half-written


def test_a_private_duplicate_does_not_leak(api, model, other, publish):
    _, secret = publish(other, "secret", {"w.bin": b"shared content"}, visibility="private")
    response = post_files(api, model, {"w.bin": b"shared content"})
    assert response.status_code == 201
    assert secret.pid not in response.content.decode()


def test_what_the_hub_derives_is_a_duplicate_only_within_its_own_artifact(owner, other, publish, tmp_path):
    """Two people publish the same weights under different files; each conversion of them gives equal bytes. The
    second is the second artifact's conversion, not a duplicate of the first's (a failed job that left it without
    one, as it did); the same result again in one artifact still points at the first."""
    from hub.errors import HubError
    from hub.registry import services

    first, _ = publish(owner, "cnn", {"cnn.pt": b"weights", "inputs.yaml": b"a"})
    second, _ = publish(other, "cnn-copy", {"cnn.pt": b"weights", "inputs.yaml": b"b"})
    onnx = {"model.onnx": b"the same graph"}

    def convert(artifact, label):
        return services.create_version(artifact, artifact.owner, label=label, system=True, duplicates="artifact",
                                       files=[staged(tmp_path, p, d) for p, d in onnx.items()],
                                       metadata=valid_metadata("model", title="converted"))

    made = convert(first, "1-onnx")
    assert convert(second, "1-onnx").artifact == second
    with pytest.raises(HubError) as again:
        convert(first, "1-onnx-again")
    assert again.value.error_code == "duplicate_version" and again.value.extra["existing_pid"] == made.pid
    with pytest.raises(HubError) as person:  # a person's upload of them is still refused hub-wide
        services.create_version(second, other, files=[staged(tmp_path, "m.onnx", b"the same graph")],
                                metadata=valid_metadata("model", title="again"))
    assert person.value.error_code == "duplicate_version"


@pytest.mark.parametrize("path", ["../evil", "/abs", "a//b", "a/./b", "back\\slash", "ctl\x01"])
def test_bad_paths_are_refused_and_nothing_is_stored(api, model, path):
    upload_id = upload(api, b"payload for bad path")
    response = api.post(model + "versions/", {"metadata": valid_metadata(),
                                              "files": [{"path": path, "upload": upload_id}]}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_path"
    assert Version.objects.count() == 0 and File.objects.count() == 0
    # A completed upload's bytes are a blob already (any web node publishes from it), kept while the upload
    # waits for a version and collected when it expires; this refusal left the upload free to use again.
    assert Upload.objects.get(pk=upload_id).state == Upload.State.COMPLETED
    fixed = api.post(model + "versions/", {"metadata": valid_metadata(),
                                           "files": [{"path": "good.bin", "upload": upload_id}]}, format="json")
    assert fixed.status_code == 201, fixed.content


def form_with_names(files: dict[str, bytes], **fields) -> tuple[bytes, str]:
    """A multipart body whose file parts carry these names as sent (Django's test client would keep only
    the base name, as browsers' file pickers do; curl's ``filename=`` and requests keep folders)."""
    parts = [(key, value) for key, value in fields.items()]
    parts += [("files", (name, data, "application/octet-stream")) for name, data in files.items()]
    return encode_multipart_formdata(parts)


def test_multipart_file_names_keep_their_folders(backend, api, model):
    """A model folder sent as form parts named ``1_Pooling/config.json`` and ``config.json`` keeps both."""
    top, pooling = b'{"hidden_size": 8}', b'{"pooling_mode_mean_tokens": true}'
    body, content_type = form_with_names({"config.json": top, "1_Pooling/config.json": pooling, "w.bin": b"w"},
                                         metadata=json.dumps(valid_metadata()))
    response = api.generic("POST", model + "versions/", body, content_type=content_type)
    assert response.status_code == 201, response.content
    files = {item["path"]: item["sha256"] for item in response.json()["files"]}
    assert files.pop("README.md")  # the card the hub wrote (issue 55)
    assert files == {"config.json": hashlib.sha256(top).hexdigest(), "w.bin": hashlib.sha256(b"w").hexdigest(),
                     "1_Pooling/config.json": hashlib.sha256(pooling).hexdigest()}


@pytest.mark.parametrize("name", ["../evil.bin", "/etc/evil.bin", "C:\\fakepath\\evil.bin"])
def test_multipart_names_outside_the_version_are_refused_not_cut(api, model, name):
    body, content_type = form_with_names({name: b"evil"}, metadata=json.dumps(valid_metadata()))
    response = api.generic("POST", model + "versions/", body, content_type=content_type)
    assert response.status_code == 400 and response.json()["code"] == "invalid_path", response.content
    assert Version.objects.count() == 0 and not get_blob_store().exists(hashlib.sha256(b"evil").hexdigest())
    assert not list(upload_dir().glob("form-*")), "a refused form leaves no staged file"


def test_a_browser_session_form_keeps_folders_too(owner, model):
    """A signed-in session is CSRF-checked, which reads the form through Django's request, not DRF's parser."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    browser.get("/")  # the CSRF cookie
    token = browser.cookies["csrftoken"].value
    body, content_type = form_with_names({"1_Pooling/config.json": b"{}"}, metadata=json.dumps(valid_metadata()))
    response = browser.generic("POST", model + "versions/", body, content_type=content_type, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201, response.content
    assert [item["path"] for item in response.json()["files"]] == ["1_Pooling/config.json", "README.md"]


def test_failure_after_storing_removes_new_blobs(api, model, owner, tmp_path, monkeypatch):
    """A failure late in the transaction leaves no rows and no orphaned blob behind."""
    from hub.registry import services

    target = Version.objects.get(pid=post_files(api, model, {"t.bin": b"target"}).json()["pid"])

    def fail(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(services.ProvenanceLink.objects, "create", fail)
    data = b"bytes that must not be orphaned"
    artifact = services.get_artifact(owner, "alice", "cnn")
    with pytest.raises(RuntimeError):
        services.create_version(artifact, owner, files=[staged(tmp_path, "x.bin", data)],
                                metadata=valid_metadata(), provenance=[services.ProvenanceRef("derived_from", target)])
    assert not get_blob_store().exists(hashlib.sha256(data).hexdigest())
    assert Version.objects.count() == 1 and not Blob.objects.filter(sha256=hashlib.sha256(data).hexdigest())


def test_metadata_must_be_an_object(api, model):
    response = post_files(api, model, {"a.bin": b"x"}, metadata=["not", "an", "object"])
    assert response.status_code == 400 and "metadata" in response.json()["errors"]
    broken = api.post(model + "versions/", {"metadata": "{not json", "files": [multipart_file("a", b"1")]},
                      format="multipart")
    assert broken.status_code == 400 and broken.json()["code"] == "invalid"


def test_reserved_and_duplicate_labels(api, model):
    assert post_files(api, model, {"a": b"1"}, version="latest").status_code == 400
    assert post_files(api, model, {"a": b"1"}, version="v1").status_code == 201
    clash = post_files(api, model, {"a": b"2"}, version="v1")
    assert clash.status_code == 409 and clash.json()["code"] == "already_exists"


def test_versions_are_immutable(api, model):
    post_files(api, model, {"a": b"1"})
    for method in ("put", "patch"):
        response = getattr(api, method)(model + "versions/1/", {"metadata": {}}, format="json")
        assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_deleted_version_is_a_tombstone_and_its_bytes_are_purged(backend, api, model, anon):
    kept = post_files(api, model, {"shared.bin": b"shared", "w.bin": b"v1"}).json()
    second = post_files(api, model, {"shared.bin": b"shared", "w.bin": b"v2"}).json()
    assert api.delete(model + "versions/2/?reason=wrong weights").status_code == 204
    store = get_blob_store()
    assert not store.exists(hashlib.sha256(b"v2").hexdigest())
    assert store.exists(hashlib.sha256(b"shared").hexdigest()), "still used by version 1"
    assert api.get(model + "versions/2/files/w.bin").status_code == 410
    record = api.get(model + "versions/2/").json()
    assert record["deleted"] and record["deletion_reason"] == "wrong weights"
    assert all(f["download_url"] is None for f in record["files"])
    assert api.get(model).json()["latest_version"] == kept["version"]
    page = anon.get("/" + second["pid"], follow=True)
    assert page.status_code == 410 and b"wrong weights" in page.content and b"w.bin" in page.content


def test_download_full_range_etag(backend, api, model, anon):
    data = os.urandom(300_000)
    files = [{"path": "dir/w.bin", "upload": upload(api, data)}]
    response = api.post(model + "versions/", {"files": files, "metadata": valid_metadata()}, format="json")
    assert response.status_code == 201
    url = model + "versions/1/files/dir/w.bin"
    sha = hashlib.sha256(data).hexdigest()
    response = anon.get(url)
    if backend == "s3":
        assert response.status_code == 302 and response["ETag"] == f'"{sha}"'
        import requests

        assert requests.get(response["Location"], timeout=10).content == data
        partial = requests.get(response["Location"], headers={"Range": "bytes=1000-1999"}, timeout=10)
        assert partial.status_code == 206 and partial.content == data[1000:2000]
        return
    assert response.status_code == 200 and response["ETag"] == f'"{sha}"'
    assert b"".join(response.streaming_content) == data
    partial = anon.get(url, HTTP_RANGE="bytes=1000-1999")
    assert partial.status_code == 206 and partial["Content-Range"] == f"bytes 1000-1999/{len(data)}"
    assert b"".join(partial.streaming_content) == data[1000:2000]
    suffix = anon.get(url, HTTP_RANGE="bytes=-10")
    assert b"".join(suffix.streaming_content) == data[-10:]
    assert anon.get(url, HTTP_RANGE=f"bytes={len(data)}-").status_code == 416
    assert anon.get(url, HTTP_IF_NONE_MATCH=f'"{sha}"').status_code == 304
    missing = anon.get(model + "versions/1/files/nope.bin", HTTP_ACCEPT="application/octet-stream")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert missing["Content-Type"] == "application/json"


def test_collaborator_can_publish(collaborator, owner, publish):
    publish(owner, "shared-model", collaborators=[collaborator])
    client = client_for(collaborator)
    response = post_files(client, "/api/v1/artifacts/alice/shared-model/", {"c.bin": b"collab"})
    assert response.status_code == 201 and response.json()["created_by"] == "bob"


def test_a_new_artifact_is_made_with_its_first_version_or_not_at_all(api, anon, other, owner):
    from hub.registry.models import Artifact

    url = "/api/v1/artifacts/alice/fresh-model/versions/"
    new = {"kind": "model", "visibility": "private", "title": "Fresh", "description": "Made with its version."}
    refused = api.post(url, {"files": [{"path": "m.pt", "upload": upload(api, os.urandom(64))}], "artifact": new,
                             "metadata": {k: v for k, v in valid_metadata().items() if k != "license"}},
                       format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_metadata", refused.content
    assert not Artifact.objects.filter(name="fresh-model").exists()  # no empty artifact stays behind
    assert api.post(url, {"metadata": valid_metadata()}, format="json").status_code == 404  # asked for: no "artifact"
    made = post_files(api, url.removesuffix("versions/"), {"m.pt": os.urandom(64)}, artifact=new)
    assert made.status_code == 201, made.content
    artifact = Artifact.objects.get(name="fresh-model")
    assert (artifact.visibility, artifact.kind, artifact.title) == ("private", "model", "Fresh")
    assert anon.get("/api/v1/artifacts/alice/fresh-model/").status_code == 404
    # Nobody makes an artifact in someone else's name.
    theirs = client_for(other).post("/api/v1/artifacts/alice/squatted/versions/",
                                    {"metadata": valid_metadata(), "artifact": new}, format="json")
    assert theirs.status_code == 404 and not Artifact.objects.filter(name="squatted").exists()
