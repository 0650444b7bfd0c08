"""Direct transfers on the S3 backend (SeaweedFS): uploads by presigned multipart URLs straight to the
object store, resumed part by part; the hub's own sha256 check before anything is published; downloads
redirected to short-lived presigned URLs, issued only after the hub's access check."""

from __future__ import annotations

import hashlib
import os
import time

import pytest
import requests

from hub.accounts.models import ApiToken
from hub.registry.models import Blob, Upload, Version
from hub.storage import blob_key
from tests.conftest import S3_PART, client_for, valid_metadata

pytestmark = pytest.mark.django_db(transaction=True)

PART = S3_PART
DATA = os.urandom(2 * PART + 123_457)  # three parts, the last one short
SHA = hashlib.sha256(DATA).hexdigest()


OPENED = []


@pytest.fixture(autouse=True)
def close_clients():
    """Kept-alive connections hold the live server's threads, and their database sessions, open."""
    yield
    while OPENED:
        OPENED.pop().close()


def hub_client(user, url):
    from hpcfair import HubClient

    _, token = ApiToken.issue(user, scope="write")
    client = HubClient(url, token, backoff=0.05)
    OPENED.append(client)
    return client


def stored(store) -> dict[str, int]:
    """Every object in the bucket: key -> size."""
    return {o.object_name: o.size for o in store.client.list_objects(store.bucket, recursive=True)}


def staging_objects(store) -> list[str]:
    """Objects under data/ that no blob points to, and multipart uploads still pending: what a finished
    upload must not leave."""
    names = stored(store)
    pointed = {store.data_key(name.rsplit("/", 1)[-1]) for name in names if not name.startswith("data/")}
    objects = [name for name in names if name.startswith("data/") and name not in pointed]
    pending = [u.object_name for u in store.client._list_multipart_uploads(store.bucket).uploads]
    return objects + pending


def put_parts(client, opened: dict, parts: dict[int, bytes]) -> None:
    urls = client.request("POST", f"{opened['url']}/parts", json={"numbers": sorted(parts)}).json()["urls"]
    for number, data in parts.items():
        response = requests.put(urls[str(number)], data=data, timeout=30)
        assert response.status_code == 200, response.text


def test_a_direct_upload_resumes_part_by_part_after_a_cut(s3, owner, live_server, tmp_path):
    client = hub_client(owner, live_server.url)
    opened = client.request("POST", "uploads/", json={"size": len(DATA), "filename": "w.bin", "direct": True,
                                                      "expected_sha256": SHA}).json()
    assert opened["multipart"] == {"part_size": PART, "part_count": 3, "parts_received": [], "url_seconds": 60}
    # A first client sends parts 1 and 3, then the connection is cut.
    put_parts(client, opened, {1: DATA[:PART], 3: DATA[2 * PART:]})
    state = client.request("GET", opened["url"]).json()
    assert state["multipart"]["parts_received"] == [1, 3]
    assert state["offset"] == len(DATA) - PART
    # The bytes never went through the hub: a PUT to it is refused with a code.
    refused = client.session.put(opened["url"], data=b"x", headers={"Content-Range": f"bytes 0-0/{len(DATA)}"})
    assert refused.status_code == 409 and refused.json()["code"] == "upload_is_direct"
    # The next run sends only the missing part, straight to the object store.
    sent = []
    resumed = hub_client(owner, live_server.url)
    resumed.bare.hooks["response"].append(lambda r, *a, **k: sent.append((r.request.method, r.request.url)))
    path = tmp_path / "w.bin"
    path.write_bytes(DATA)
    done = resumed.resume_upload(opened["url"], path)
    assert done["state"] == "completed" and done["sha256"] == SHA
    assert [m for m, _ in sent] == ["PUT"] and "partNumber=2" in sent[0][1]
    assert s3.exists(SHA) and staging_objects(s3) == [], "the checked object is the blob; no staging object left"
    # The store holds the bytes once: the blob's key is a pointer to the assembled object, not a copy.
    assert stored(s3) == {f"data/{opened['id']}": len(DATA), blob_key(SHA): len(f"data/{opened['id']}")}
    with s3.open(SHA, PART - 10, 20) as ranged:
        assert ranged.read() == DATA[PART - 10:PART + 10]
    # It publishes like any upload, and downloads back (a redirect to the store, ranges in parallel).
    resumed.create_artifact("model", "direct")
    version = resumed.create_version("alice/direct", {"w.bin": path}, metadata=valid_metadata())
    assert {f["path"]: f["sha256"] for f in version["files"]}["w.bin"] == SHA
    out = resumed.download_file("alice/direct", "1", "w.bin", tmp_path / "back.bin", cache=False)
    assert out.read_bytes() == DATA
    # Deleting the blob (the collector does, once nothing references it) removes pointer and bytes.
    s3.delete(SHA)
    card = {f["path"]: f["sha256"] for f in version["files"]}["README.md"]  # the card the hub wrote stays
    assert not s3.exists(SHA) and set(stored(s3)) == {blob_key(card)}


def test_the_client_uploads_directly_when_the_hub_offers_it(s3, owner, live_server, tmp_path):
    client = hub_client(owner, live_server.url)
    methods = []
    client.bare.hooks["response"].append(lambda r, *a, **k: methods.append(r.request.method))
    path = tmp_path / "w.bin"
    path.write_bytes(DATA)
    done = client.upload_file(path)
    assert done["sha256"] == SHA and methods == ["PUT"] * 3
    assert Upload.objects.get(pk=done["id"]).direct_id
    # Abandoning the completed upload leaves the checked blob's bytes to the collector, not half-deleted.
    client.request("DELETE", f"uploads/{done['id']}")
    assert Upload.objects.get(pk=done["id"]).state == Upload.State.ABORTED
    with s3.open(SHA) as whole:
        assert whole.read() == DATA


def test_a_corrupted_part_is_refused_before_publication(s3, owner, live_server, tmp_path):
    client = hub_client(owner, live_server.url)
    opened = client.request("POST", "uploads/", json={"size": len(DATA), "direct": True}).json()
    damaged = bytearray(DATA[PART:2 * PART])
    damaged[1000] ^= 0xFF
    put_parts(client, opened, {1: DATA[:PART], 2: bytes(damaged), 3: DATA[2 * PART:]})
    answer = client.session.post(f"{opened['url']}/complete", json={"sha256": SHA})
    assert answer.status_code == 400 and answer.json()["code"] == "checksum_mismatch"
    assert answer.headers["X-Error-Code"] == "checksum_mismatch"
    bad = answer.json()["sha256"]
    assert bad != SHA and "damaged" in answer.json()["detail"]
    # Nothing is left: no staging object, no pending copy into the announced blob, no blob under either
    # digest, the session is aborted.
    assert staging_objects(s3) == []
    assert not s3.exists(SHA) and not s3.exists(bad)
    assert Upload.objects.get(pk=opened["id"]).state == Upload.State.ABORTED
    assert not Blob.objects.exists()
    # And nothing can be published from it.
    client.create_artifact("model", "broken")
    refused = client.session.post(client.url("artifacts/alice/broken/versions/"), json={
        "files": [{"path": "w.bin", "upload": opened["id"]}], "metadata": valid_metadata()})
    assert refused.status_code == 409 and refused.json()["code"] == "upload_not_open"
    assert not Version.objects.exists()


def test_an_incomplete_direct_upload_cannot_complete(s3, owner, live_server):
    client = hub_client(owner, live_server.url)
    opened = client.request("POST", "uploads/", json={"size": len(DATA), "direct": True}).json()
    put_parts(client, opened, {1: DATA[:PART]})
    answer = client.session.post(f"{opened['url']}/complete", json={"sha256": SHA})
    assert answer.status_code == 400 and answer.json()["code"] == "upload_incomplete"
    assert answer.json()["missing_parts"] == [2, 3]
    # While another request completes it (it has claimed the upload), a second completion waits its turn.
    from django.utils import timezone

    Upload.objects.filter(pk=opened["id"]).update(completed_at=timezone.now())
    busy = client.session.post(f"{opened['url']}/complete", json={"sha256": SHA})
    assert busy.status_code == 409 and busy.json()["code"] == "upload_busy"
    Upload.objects.filter(pk=opened["id"]).update(completed_at=None)
    too_many = client.session.post(f"{opened['url']}/parts", json={"numbers": [4]})
    assert too_many.status_code == 400 and too_many.json()["code"] == "invalid"
    client.request("DELETE", opened["url"])  # abort: the store forgets the parts
    assert Upload.objects.get(pk=opened["id"]).state == Upload.State.ABORTED


def test_part_urls_are_for_the_uploads_owner_only(s3, owner, other, live_server):
    client = hub_client(owner, live_server.url)
    opened = client.request("POST", "uploads/", json={"size": len(DATA), "direct": True}).json()
    stranger = client_for(other)
    assert stranger.post(f"/api/v1/uploads/{opened['id']}/parts", {"numbers": [1]}, format="json").status_code == 404


def test_presigned_downloads_are_short_lived_and_only_for_readers(s3, settings, owner, other, anon, publish):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "S3_PRESIGN_SECONDS": 2}
    data = os.urandom(10_000)
    publish(owner, "secret", {"w.bin": data}, visibility="private")
    url = "/api/v1/artifacts/alice/secret/versions/1/files/w.bin"
    for stranger in (anon, client_for(other)):  # no access: no URL, the same answer as a missing artifact
        refused = stranger.get(url)
        assert refused.status_code == 404 and "Location" not in refused
    answer = client_for(owner).get(url)
    assert answer.status_code == 302
    location = answer["Location"]
    assert "X-Amz-Signature=" in location and "X-Amz-Expires=2&" in location
    assert blob_key(hashlib.sha256(data).hexdigest()) in location
    assert requests.get(location, timeout=10).content == data
    unsigned = requests.get(location.split("?")[0], timeout=10)
    assert unsigned.status_code == 403, "the object itself is not readable without a signature"
    time.sleep(3.5)
    expired = requests.get(location, timeout=10)
    assert expired.status_code == 403 and b"expired" in expired.content


def test_the_collector_removes_expired_direct_uploads_and_keeps_checked_ones(s3, owner, live_server, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from hub.registry.gc import collect

    client = hub_client(owner, live_server.url)
    stale = client.request("POST", "uploads/", json={"size": len(DATA), "direct": True}).json()
    put_parts(client, stale, {1: DATA[:PART]})
    path = tmp_path / "w.bin"
    path.write_bytes(DATA)
    checked = client.upload_file(path)  # completed, not in a version yet: its blob must survive
    assert staging_objects(s3) == [f"data/{stale['id']}"], "the stale upload's pending parts"
    Upload.objects.filter(pk=stale["id"]).update(expires=timezone.now() - timedelta(hours=1))
    collect(grace_hours=0)
    assert Upload.objects.get(pk=stale["id"]).state == Upload.State.ABORTED
    assert staging_objects(s3) == [], "the expired upload's parts are gone from the store"
    assert s3.exists(checked["sha256"]), "a checked upload waiting for its version keeps its blob"
    # Once that upload expires unused, its blob goes: the pointer and the bytes it names.
    Upload.objects.filter(pk=checked["id"]).update(expires=timezone.now() - timedelta(hours=1))
    collect(grace_hours=0)
    assert not s3.exists(checked["sha256"]) and stored(s3) == {}


def test_publishing_direct_uploads_derives_metadata_fetching_only_what_it_reads(s3, owner, live_server, tmp_path,
                                                                                monkeypatch):
    from hub.registry.uploads import staged_path
    from tests.metadata.test_api import onnx_bytes

    client = hub_client(owner, live_server.url)
    (tmp_path / "m.onnx").write_bytes(onnx_bytes())
    (tmp_path / "w.bin").write_bytes(DATA)
    done = {name: client.upload_file(tmp_path / name) for name in ("m.onnx", "w.bin")}
    uploads = {name: Upload.objects.get(pk=d["id"]) for name, d in done.items()}
    assert all(u.direct_id and not staged_path(u).exists() for u in uploads.values()), \
        "completing read the objects back to hash them, and wrote nothing to the hub's disk"
    fetched = []
    real_open = type(s3).open

    def counted_open(self, sha256, start=0, length=None):  # the real store's open, recorded when whole
        if length is None:
            fetched.append(sha256)
        else:  # a range: a format sniffed by its first bytes (GGUF's magic in a .bin), never more than a header
            assert length <= 64 * 1024, (sha256, start, length)
        return real_open(self, sha256, start, length)

    monkeypatch.setattr(type(s3), "open", counted_open)
    client.create_artifact("model", "fetched")
    version = client.request("POST", "artifacts/alice/fetched/versions/", json={
        "files": [{"path": name, "upload": d["id"]} for name, d in done.items()], "metadata": valid_metadata()}).json()
    meta = version["metadata"]
    assert meta["format"] == "onnx" and meta["opset"] == 17 and meta["parameters"] == 8, "derived from the ONNX file"
    assert fetched == [done["m.onnx"]["sha256"]], "only the file derivation reads came back from the store"
    assert not any(staged_path(u).exists() for u in uploads.values()), "the fetched copy is gone after publishing"


def test_the_collector_removes_upload_objects_no_blob_points_to(s3, owner, live_server, tmp_path):
    from hub.registry.gc import collect

    client = hub_client(owner, live_server.url)
    (tmp_path / "kept.bin").write_bytes(DATA)
    (tmp_path / "lost.bin").write_bytes(DATA[::-1])
    kept, lost = client.upload_file(tmp_path / "kept.bin"), client.upload_file(tmp_path / "lost.bin")
    # A crash after a blob's pointer went and before its object did: the object is left, named by nothing.
    s3.client.remove_object(s3.bucket, blob_key(lost["sha256"]))
    assert f"data/{lost['id']}" in stored(s3)
    done = collect(grace_hours=0)
    assert done.orphans == 1 and "orphaned upload objects removed: 1" in str(done)
    assert f"data/{lost['id']}" not in stored(s3)
    with s3.open(kept["sha256"]) as blob:  # a checked upload waiting for its version keeps pointer and bytes
        assert blob.read() == DATA
