"""The same storage suite on every backend: filesystem and a real S3 server."""

from __future__ import annotations

import hashlib
import os

import pytest
import requests

from hub.storage import blob_key, get_blob_store


def _src(tmp_path, data: bytes):
    path = tmp_path / f"src-{len(data)}-{hashlib.md5(data).hexdigest()}"  # noqa: S324 - a file name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_put_is_idempotent_and_content_addressed(backend, tmp_path):
    store = get_blob_store()
    data = os.urandom(3000)
    path, sha = _src(tmp_path, data)
    assert store.name == backend
    assert not store.exists(sha)
    assert store.put_file(path, sha) is True
    assert store.exists(sha)
    assert store.put_file(path, sha) is False  # identical content stored once
    assert path.exists(), "the source stays where it is"
    with store.open(sha) as stream:
        assert stream.read() == data


def test_open_reads_byte_ranges(backend, tmp_path):
    store = get_blob_store()
    data = bytes(range(256)) * 40
    path, sha = _src(tmp_path, data)
    store.put_file(path, sha)
    with store.open(sha, 100, 50) as stream:
        assert stream.read() == data[100:150]
    with store.open(sha, len(data) - 10) as stream:
        assert stream.read() == data[-10:]


def test_delete_and_listing(backend, tmp_path):
    store = get_blob_store()
    kept_path, kept = _src(tmp_path, b"kept")
    gone_path, gone = _src(tmp_path, b"gone")
    store.put_file(kept_path, kept)
    store.put_file(gone_path, gone)
    assert {kept, gone} <= {sha for sha, _ in store.iter_blobs()}
    store.delete(gone)
    store.delete(gone)  # deleting a missing blob is no error
    assert not store.exists(gone)
    listed = {sha for sha, _ in store.iter_blobs()}
    assert kept in listed and gone not in listed


def test_missing_blob_raises_file_not_found(backend):
    with pytest.raises(FileNotFoundError):
        get_blob_store().open("0" * 64).read()


def test_download_url_is_presigned_on_s3_only(backend, tmp_path):
    store = get_blob_store()
    path, sha = _src(tmp_path, b"presigned bytes")
    store.put_file(path, sha)
    url = store.download_url(sha, "file.bin", "application/octet-stream")
    if backend == "filesystem":
        assert url is None and store.local_path(sha) is not None
    else:
        assert "X-Amz-Signature" in url
        assert requests.get(url, timeout=10).content == b"presigned bytes"
        assert requests.get(url, headers={"Range": "bytes=10-14"}, timeout=10).content == b"bytes"


def test_blob_key_rejects_non_digests():
    with pytest.raises(ValueError):
        blob_key("../../etc/passwd")
    assert blob_key("ab" * 32).startswith("ab/ab/")


def test_staged_objects_are_kept_apart_from_blobs(backend, tmp_path):
    """Job inputs and upload parts staged by one node, read by another: put, fetch, list, remove by folder."""
    store = get_blob_store()
    path, sha = _src(tmp_path, os.urandom(5000))
    store.put_staged("jobs/j1/inputs.npz", path)
    store.put_staged("jobs/j1/more.npz", path)
    store.put_staged("uploads/u1/0000-part", path)
    fetched = store.fetch_staged("jobs/j1/inputs.npz", tmp_path / "fetched")
    assert fetched.read_bytes() == path.read_bytes()
    listed = {key for key, _ in store.iter_staged()}
    assert {"jobs/j1/inputs.npz", "jobs/j1/more.npz", "uploads/u1/0000-part"} <= listed
    assert not {sha for sha, _ in store.iter_blobs()} & {"inputs.npz", "0000-part"}
    store.remove_staged("uploads/u1/0000-part")  # one object
    store.remove_staged("jobs/j1/")  # a folder
    store.remove_staged("jobs/nothing/")  # nothing there: no error
    assert not {key for key, _ in store.iter_staged()} & listed
    with pytest.raises(FileNotFoundError):
        store.fetch_staged("jobs/j1/inputs.npz", tmp_path / "again")
    assert not (tmp_path / "again.fetching").exists()
    for bad in ("../x", "jobs/../../x", "/etc/passwd", ""):
        with pytest.raises(ValueError):
            store.put_staged(bad, path)
