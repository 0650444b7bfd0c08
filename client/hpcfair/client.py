"""``HubClient``: the hub's REST API with transfers that survive real networks.

Uploads go through resumable sessions (chunks with ``Content-Range``; after a failure the client asks
the hub how many bytes it holds and continues from there). Downloads write ``<dest>.incomplete`` and
resume it with ``Range``; the sha256 is checked at the end. 429/5xx and dropped connections are
retried with exponential backoff.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
import urllib3

from hpcfair.errors import HubError, TransferError, from_response

DEFAULT_ENDPOINT = "http://127.0.0.1:8000"
CHUNK_SIZE = 64 * 1024 * 1024
DOWNLOAD_BLOCK = 4 * 1024 * 1024
RETRY_STATUSES = {429, 500, 502, 503, 504}


def _sha256_state(path: str | Path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest


def sha256_file(path: str | Path) -> str:
    return _sha256_state(path).hexdigest()


class HubClient:
    """A session with one hub. ``endpoint`` and ``token`` come from arguments or the environment
    (``HPCFAIR_ENDPOINT``, ``HPCFAIR_TOKEN``)."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, retries: int = 5,
                 backoff: float = 0.5, timeout: float = 300.0) -> None:
        self.endpoint = (endpoint or os.environ.get("HPCFAIR_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.token = token or os.environ.get("HPCFAIR_TOKEN")
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.session = requests.Session()
        if self.token:
            self.session.headers["Authorization"] = f"Bearer {self.token}"

    # --- plumbing ---------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.endpoint}/api/v1/{path.lstrip('/')}"

    def request(self, method: str, path: str, *, retry: bool = True, **kwargs: Any) -> requests.Response:
        """One API call; raises the typed ``HubError`` for error answers."""
        kwargs.setdefault("timeout", self.timeout)
        response = self._with_retries(lambda: self.session.request(method, self.url(path), **kwargs), retry)
        if response.status_code >= 400:
            raise from_response(response)
        return response

    def _with_retries(self, send: Callable[[], requests.Response], retry: bool = True) -> requests.Response:
        attempt = 0
        while True:
            try:
                response = send()
                if not retry or response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    return response
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
                if not retry or attempt >= self.retries:
                    raise
            time.sleep(self.backoff * 2**attempt)
            attempt += 1

    # --- artifacts --------------------------------------------------------------------------------

    def search(self, q: str = "", **filters: str) -> list[dict[str, Any]]:
        return self.request("GET", "artifacts/", params={"q": q, **filters}).json()["results"]

    def create_artifact(self, kind: str, name: str, **fields: Any) -> dict[str, Any]:
        return self.request("POST", "artifacts/", json={"kind": kind, "name": name, **fields}).json()

    def create_version(self, owner_name: str, files: dict[str, str | Path], *, version: str = "",
                       metadata: dict[str, Any] | None = None,
                       provenance: list[dict[str, str]] | None = None) -> dict[str, Any]:
        """Publish a version from local files ({path in version: local path}), via resumable uploads."""
        items = [{"path": name, "upload": self.upload_file(local)["id"]} for name, local in files.items()]
        body = {"version": version, "metadata": metadata or {}, "files": items, "provenance": provenance or []}
        return self.request("POST", f"artifacts/{owner_name}/versions/", json=body).json()

    # --- transfers --------------------------------------------------------------------------------

    def upload_file(self, path: str | Path, *, sha256: str | None = None,
                    chunk_size: int = CHUNK_SIZE) -> dict[str, Any]:
        """Send a file through a resumable upload session; returns the completed upload."""
        path = Path(path)
        size = path.stat().st_size
        sha256 = sha256 or sha256_file(path)
        upload = self.request("POST", "uploads/", json={"size": size, "filename": path.name,
                                                        "expected_sha256": sha256}).json()
        return self.resume_upload(upload["url"], path, chunk_size=chunk_size)

    def resume_upload(self, upload_url: str, path: str | Path, *, chunk_size: int = CHUNK_SIZE) -> dict[str, Any]:
        """Send what the hub does not hold yet of an open upload, then complete it."""
        path = Path(path)
        size = path.stat().st_size
        failures = 0
        with open(path, "rb") as handle:
            while True:
                offset = self.request("GET", upload_url).json()["offset"]
                if offset >= size:
                    break
                end = min(offset + chunk_size, size)
                handle.seek(offset)
                # One buffer per chunk (memory bounded by chunk_size) is sent with a few large writes.
                body = handle.read(end - offset)
                try:
                    self.session.put(self.url(upload_url), data=body, timeout=self.timeout,
                                     headers={"Content-Range": f"bytes {offset}-{end - 1}/{size}",
                                              "Content-Type": "application/octet-stream"})
                except (requests.ConnectionError, requests.Timeout):
                    failures += 1
                    if failures > self.retries:
                        raise TransferError(f"upload of {path} failed after {failures} broken connections")
                    time.sleep(self.backoff * 2 ** (failures - 1))
                    continue
        return self.request("POST", f"{upload_url}/complete", json={}).json()

    def download_file(self, owner_name: str, version: str, path: str, dest: str | Path) -> Path:
        """Download one file to ``dest``, resuming ``dest.incomplete``; checks size and sha256."""
        dest = Path(dest)
        info = self.request("GET", f"artifacts/{owner_name}/versions/{version}/").json()
        meta = next((f for f in info["files"] if f["path"] == path), None)
        if meta is None:
            raise HubError(f"{owner_name}@{version} has no file {path!r}", code="not_found", status=404)
        partial = dest.with_name(dest.name + ".incomplete")
        url = self.url(f"artifacts/{owner_name}/versions/{info['version']}/files/{quote(path)}")
        failures = 0
        digest, hashed = None, -1  # a running sha256 of the bytes written so far, when continuous
        while True:
            have = partial.stat().st_size if partial.exists() else 0
            if have >= meta["size"]:
                break
            if hashed != have:  # resuming a file from an earlier run or a broken transfer
                digest, hashed = hashlib.sha256(), 0
                if have:
                    digest = _sha256_state(partial)
                    hashed = have
            try:
                response = self.request("GET", url, stream=True, headers={"Range": f"bytes={have}-"})
                if response.status_code != 206:  # the server sent the whole file
                    digest, hashed, mode = hashlib.sha256(), 0, "wb"
                else:
                    mode = "ab"
                with open(partial, mode) as out:
                    while chunk := response.raw.read(DOWNLOAD_BLOCK):
                        out.write(chunk)
                        digest.update(chunk)
                        hashed += len(chunk)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    urllib3.exceptions.HTTPError):
                failures += 1
                hashed = -1
                if failures > self.retries:
                    raise TransferError(f"download of {path} failed after {failures} broken connections")
                time.sleep(self.backoff * 2 ** (failures - 1))
        actual = digest.hexdigest() if digest is not None and hashed == meta["size"] else sha256_file(partial)
        if partial.stat().st_size != meta["size"] or actual != meta["sha256"]:
            partial.unlink()
            raise TransferError(f"{path}: the bytes received do not match the hub's size and sha256; retry")
        partial.replace(dest)
        return dest
