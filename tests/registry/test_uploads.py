"""Resumable uploads: chunks, offsets, resume after a broken connection, sha256 checks."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from urllib.parse import urlparse

import pytest

from hub.registry.models import Upload
from hub.storage import get_blob_store
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def put(api, upload_id, data: bytes, start: int, total: int):
    return api.generic("PUT", f"/api/v1/uploads/{upload_id}", data, content_type="application/octet-stream",
                       HTTP_CONTENT_RANGE=f"bytes {start}-{start + len(data) - 1}/{total}")


def test_chunked_upload_with_offsets_and_sha256(api):
    data = os.urandom(1_000_000)
    sha = hashlib.sha256(data).hexdigest()
    opened = api.post("/api/v1/uploads/", {"size": len(data), "expected_sha256": sha}, format="json").json()
    uid = opened["id"]
    assert opened["offset"] == 0 and opened["state"] == "open"
    assert put(api, uid, data[:400_000], 0, len(data)).status_code == 200
    wrong = put(api, uid, data[500_000:600_000], 500_000, len(data))
    assert wrong.status_code == 409 and wrong.json()["offset"] == 400_000
    early = api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json")
    assert early.status_code == 400 and early.json()["code"] == "upload_incomplete"
    status = api.get(f"/api/v1/uploads/{uid}")
    assert status.json()["offset"] == 400_000 and status["Upload-Offset"] == "400000"
    assert put(api, uid, data[400_000:], 400_000, len(data)).status_code == 200
    done = api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json").json()
    assert done["state"] == "completed" and done["sha256"] == sha


def test_checksum_mismatch_is_refused(api):
    data = b"x" * 1000
    uid = api.post("/api/v1/uploads/", {"size": 1000}, format="json").json()["id"]
    put(api, uid, data, 0, 1000)
    response = api.post(f"/api/v1/uploads/{uid}/complete", {"sha256": "0" * 64}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "checksum_mismatch"
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
    assert Upload.objects.get(pk=uid).state == Upload.State.OPEN


@pytest.mark.parametrize("header, code", [
    ("bytes 0-10/5", "upload_size_mismatch"),
    ("bytes 0-2000/1000", "invalid_range"),
    ("bytes 10-5/1000", "invalid_range"),
    ("items 0-1/1000", "invalid_range"),
    ("garbage", "invalid_range"),
])
def test_bad_content_ranges(api, header, code):
    uid = api.post("/api/v1/uploads/", {"size": 1000}, format="json").json()["id"]
    response = api.generic("PUT", f"/api/v1/uploads/{uid}", b"abc", content_type="application/octet-stream",
                           HTTP_CONTENT_RANGE=header)
    assert response.status_code in (400, 416) and response.json()["code"] == code


def test_uploads_are_private_to_their_owner(api, other):
    uid = api.post("/api/v1/uploads/", {"size": 3}, format="json").json()["id"]
    assert client_for(other).get(f"/api/v1/uploads/{uid}").status_code == 404
    assert client_for(None).post("/api/v1/uploads/", {"size": 3}, format="json").status_code == 401


def test_too_large_and_negative_sizes(api, settings):
    settings.HUB_UPLOAD_MAX_SIZE = 100
    assert api.post("/api/v1/uploads/", {"size": 101}, format="json").json()["code"] == "upload_too_large"
    assert api.post("/api/v1/uploads/", {"size": -1}, format="json").status_code == 400


def test_abort_removes_staged_bytes(api, settings):
    uid = api.post("/api/v1/uploads/", {"size": 3}, format="json").json()["id"]
    put(api, uid, b"abc", 0, 3)
    assert [key for key, _ in get_blob_store().iter_staged() if key.startswith(f"uploads/{uid}/")]
    assert api.delete(f"/api/v1/uploads/{uid}").status_code == 204
    assert not [key for key, _ in get_blob_store().iter_staged() if key.startswith(f"uploads/{uid}/")]
    assert put(api, uid, b"abc", 0, 3).json()["code"] == "upload_not_open"


@pytest.mark.django_db(transaction=True)
def test_resume_after_the_connection_breaks_mid_chunk(live_server, owner, tmp_path, settings):
    """A real socket sends half a chunk and hangs up; the hub keeps what arrived; the client resumes."""
    from hpcfair import HubClient

    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url  # the links the hub hands out point at this server
    _, token = ApiToken.issue(owner, scope="write")
    client = HubClient(live_server.url, token)
    data = os.urandom(3_000_000)
    sha = hashlib.sha256(data).hexdigest()
    opened = client.request("POST", "uploads/", json={"size": len(data), "expected_sha256": sha}).json()
    host = urlparse(live_server.url)
    with socket.create_connection((host.hostname, host.port)) as sock:
        head = (f"PUT /api/v1/uploads/{opened['id']} HTTP/1.1\r\nHost: {host.netloc}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Length: {len(data)}\r\nContent-Range: bytes 0-{len(data) - 1}/{len(data)}\r\n\r\n")
        sock.sendall(head.encode() + data[:1_200_000])
    # The server notices the hang-up; what it wrote stays, and is reported as the offset.
    for _ in range(100):
        offset = client.request("GET", opened["url"]).json()["offset"]
        if offset == 1_200_000:
            break
        time.sleep(0.05)
    assert offset == 1_200_000
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    done = client.resume_upload(opened["url"], path, chunk_size=1_000_000)
    assert done["state"] == "completed" and done["sha256"] == sha


@pytest.mark.django_db(transaction=True)
def test_the_client_resumes_from_what_the_hub_holds_when_its_connection_dies_mid_chunk(live_server, owner, tmp_path,
                                                                                     settings, monkeypatch):
    """The client's own connection dies inside a chunk: it asks the hub what arrived and goes on from there,
    sending each byte once more at most, and the sha256 it announces is the file's."""
    import requests
    from hpcfair import HubClient, transfer

    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    client = HubClient(live_server.url, token, backoff=0.05)
    data = os.urandom(5_000_000)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    real_iter = transfer.FileBody.__iter__
    starts: list[int] = []

    def dies_once(body):
        starts.append(body.offset)
        sent = 0
        for block in real_iter(body):
            for piece in range(0, len(block), 500_000):
                if len(starts) == 1 and sent >= 1_500_000:
                    raise requests.ConnectionError("the network went away")
                sent += len(block[piece:piece + 500_000])
                yield block[piece:piece + 500_000]

    monkeypatch.setattr(transfer.FileBody, "__iter__", dies_once)
    done = client.upload_file(path, chunk_size=4_000_000)
    client.close()
    assert done["state"] == "completed" and done["sha256"] == hashlib.sha256(data).hexdigest()
    # The hub stores a cut chunk when its end of the connection sees the cut; a client that asks before that
    # hears 0 and is refused with the offset it then holds (409 upload_offset_mismatch), and goes on from it.
    resumed = [start for start in starts[1:] if start > 0]
    assert starts[0] == 0 and len(starts) - len(resumed) <= 2, starts
    assert resumed and resumed[0] <= 1_500_000, starts  # resumed from what the hub held
    assert resumed[1:] == [n for n in [resumed[0] + 4_000_000] if n < len(data)], starts  # then on, once each
