"""Downloads that survive real networks, against a small test server (127.0.0.1) that drops the
connection in the middle of a file and answers 503 now and then: the client resumes with ``Range``, checks
the sha256, and a second download of the same content is a cache hit that sends no file bytes."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hpcfair import HubClient, NotFoundError, TransferError

DATA = os.urandom(3 * 1024 * 1024 + 17)
SHA = hashlib.sha256(DATA).hexdigest()
VERSION = {"artifact": "alice/big", "version": "1", "pid": "ark:/99999/fk4test", "files": [
    {"path": "weights.bin", "size": len(DATA), "sha256": SHA,
     "download_url": "/api/v1/artifacts/alice/big/versions/1/files/weights.bin"}]}


class Flaky(BaseHTTPRequestHandler):
    """Version JSON; file bytes honouring Range, cut off after ``cut`` bytes on the first ``drops`` tries."""

    drops = 2
    cut = 1024 * 1024
    busy = 1  # 503 answers before the version record is served
    served: list[tuple[str, str]] = []
    corrupt = False

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        cls.served.append((self.path, self.headers.get("Range", "")))
        if self.path.startswith("/api/v1/artifacts/alice/big/versions/1/files/"):
            start = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0] or 0)
            body = DATA[start:]
            if cls.corrupt:
                body = bytes([body[0] ^ 1]) + body[1:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if cls.drops > 0:
                cls.drops -= 1
                self.wfile.write(body[:cls.cut])
                self.wfile.flush()
                self.connection.shutdown(2)  # the connection drops mid-file
                return
            self.wfile.write(body)
            return
        if self.path.startswith("/api/v1/artifacts/alice/big/versions/1/"):
            if cls.busy > 0:
                cls.busy -= 1
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_json(200, VERSION)
            return
        self.send_json(404, {"code": "not_found", "detail": "No such thing.", "request_id": "req-1"})

    def send_json(self, status: int, data: dict) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def flaky():
    Flaky.drops, Flaky.busy, Flaky.served, Flaky.corrupt = 2, 1, [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_resumes_after_dropped_connections_and_hits_the_cache(flaky, tmp_path):
    client = HubClient(flaky, backoff=0.01)
    dest = client.download_file("alice/big", "1", "weights.bin", tmp_path / "a" / "weights.bin")
    assert dest.read_bytes() == DATA
    ranges = [r for p, r in Flaky.served if "/files/" in p]
    assert ranges == ["bytes=0-", f"bytes={Flaky.cut}-", f"bytes={2 * Flaky.cut}-"], ranges
    assert client.cache.get(SHA).read_bytes() == DATA
    assert not list(client.cache.root.rglob("*.incomplete"))

    Flaky.served.clear()
    again = client.download_file("alice/big", "1", "weights.bin", tmp_path / "b" / "copy.bin")
    assert again.read_bytes() == DATA and not [p for p, _ in Flaky.served if "/files/" in p]  # a cache hit
    again.write_bytes(b"edited")  # a downloaded file is a copy: editing it leaves the cache intact
    assert client.cache.get(SHA).read_bytes() == DATA


def test_an_interrupted_download_continues_in_the_next_run(flaky, tmp_path):
    Flaky.drops = 10
    with pytest.raises(TransferError, match="run it again to resume"):
        HubClient(flaky, retries=1, backoff=0.01).download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin")
    partial = HubClient(flaky).cache.path(SHA).with_name(SHA + ".incomplete")
    assert partial.stat().st_size == 2 * Flaky.cut and not (tmp_path / "w.bin").exists()
    Flaky.drops, Flaky.served = 0, []
    dest = HubClient(flaky).download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin")
    assert dest.read_bytes() == DATA
    assert [r for p, r in Flaky.served if "/files/" in p] == [f"bytes={2 * Flaky.cut}-"]


def test_bytes_that_do_not_match_the_sha256_are_refused_and_dropped(flaky, tmp_path):
    Flaky.drops, Flaky.corrupt = 0, True
    with pytest.raises(TransferError, match="do not match") as caught:
        HubClient(flaky, backoff=0.01).download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin")
    assert caught.value.code == "checksum_mismatch"
    assert not (tmp_path / "w.bin").exists()
    assert not [p for p in HubClient(flaky).cache.root.rglob("*") if p.is_file()]


def test_errors_carry_the_hubs_code_message_and_request_id(flaky):
    with pytest.raises(NotFoundError) as caught:
        HubClient(flaky).artifact("alice/none")
    assert (caught.value.code, caught.value.status, caught.value.request_id) == ("not_found", 404, "req-1")
    assert "No such thing." in str(caught.value)
    with pytest.raises(TransferError, match="Cannot reach the hub") as caught:
        HubClient("http://127.0.0.1:9", retries=0).me()
    assert caught.value.code == "unreachable"
