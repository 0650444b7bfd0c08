"""Fetched data: the hub reads a file from an allow-listed URL (``HUB_FETCH_ALLOWED``: HTTP(S) or S3 prefixes)
into a resumable upload, chunk by chunk through ``uploads.write_chunk`` (parts in the object store, the offset in
the upload's row, the sha256 computed as the bytes arrive), so a retried job resumes where the last one stopped
(HTTP ``Range``, S3 offsets) and any node may take it up. Bounded: ``HUB_FETCH_MAX_SIZE``, a deadline
(``HUB_FETCH_DEADLINE_S``), at most ``HUB_FETCH_MAX_REDIRECTS`` redirects, each to an allowed URL too.
"""

from __future__ import annotations

import time
from urllib.parse import urljoin, urlsplit

import urllib3
from django.conf import settings
from django.db import transaction
from hpcfair.compute import CodedError

from hub.errors import HubError
from hub.registry import quota, references, uploads
from hub.registry.models import Upload

CHUNK = 64 * 1024 * 1024  # one part of the upload: a broken transfer loses at most this much
TIMEOUT = urllib3.Timeout(connect=10, read=60)


def _normal(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path or '/'}"


def check_url(url: str) -> str:
    """``url`` when it is HTTP(S) or S3 and starts with an allowed prefix; else a coded refusal."""
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "s3") or not parts.netloc or "@" in parts.netloc:
        raise HubError("invalid", f"{url[:200]!r} is not an http(s):// or s3:// URL (without credentials in it).",
                       errors={"fetch": ["Not an http(s) or s3 URL."]})
    if not any(_normal(url).startswith(_normal(prefix)) for prefix in settings.HUB_FETCH_ALLOWED):
        allowed = ", ".join(settings.HUB_FETCH_ALLOWED) or "none: fetching is off here"
        raise HubError("fetch_not_allowed", f"The hub fetches only from the sites its administrators allow "
                                            f"(HUB_FETCH_ALLOWED: {allowed}); {parts.netloc} is not one. Upload "
                                            "the file yourself, or ask them to allow the site.")
    return url


def _http(url: str, offset: int) -> urllib3.BaseHTTPResponse:
    """The response to GET ``url`` from byte ``offset``, redirects followed by hand: each must be allowed."""
    pool = urllib3.PoolManager(timeout=TIMEOUT, retries=False)
    for _ in range(settings.HUB_FETCH_MAX_REDIRECTS + 1):
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        try:
            response = pool.request("GET", url, headers=headers, redirect=False, preload_content=False,
                                    enforce_content_length=False)  # a short body: kept, resumed from
        except urllib3.exceptions.HTTPError as exc:
            raise CodedError("fetch_failed", f"{urlsplit(url).netloc} could not be reached: {type(exc).__name__}.")
        if response.status in (301, 302, 303, 307, 308):
            url = urljoin(url, response.headers.get("Location", ""))
            response.release_conn()
            try:
                check_url(url)
            except HubError as exc:
                raise CodedError("fetch_not_allowed", f"The server redirected to another site: {exc.detail}")
            continue
        if response.status not in (200, 206) or (offset and response.status != 206):
            response.release_conn()
            raise CodedError("fetch_failed", f"{urlsplit(url).netloc} answered HTTP {response.status}"
                                             + (" to a Range request" if offset else "") + ".")
        return response
    raise CodedError("fetch_not_allowed", f"More than {settings.HUB_FETCH_MAX_REDIRECTS} redirects.")


def _size_of(response: urllib3.BaseHTTPResponse) -> int:
    total = (response.headers.get("Content-Range") or "").rpartition("/")[2]
    length = total if total.isdigit() else response.headers.get("Content-Length", "")
    if not length.isdigit():
        raise CodedError("fetch_failed", "The server sent no size (Content-Length); the hub fetches only files of "
                                         "a known size.")
    return int(length)


def _open(url: str, offset: int):
    """(a stream from ``offset``, the whole file's size)."""
    if url.startswith(references.S3):
        try:
            size = references.members(url)[0].size
            return (references.open_bytes(url, offset) if offset < size else None), size
        except Exception as exc:  # noqa: BLE001 - minio's errors, a missing object: the fetch fails, coded
            raise CodedError("fetch_failed", f"{url} could not be read: {type(exc).__name__}.")
    response = _http(url, offset)
    return response, _size_of(response)


class _UntilBroken:
    """A stream whose failure reads as its end, so ``write_chunk`` keeps what arrived and a retry resumes there."""

    def __init__(self, stream) -> None:
        self.stream, self.error = stream, None

    def read(self, size: int = -1) -> bytes:
        try:
            return self.stream.read(size)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.error = exc
            return b""


def run(upload: Upload, log=print, progress=None) -> Upload:
    """Fetch ``upload.source`` into ``upload`` (resuming at its offset) and complete it."""
    deadline = time.monotonic() + settings.HUB_FETCH_DEADLINE_S
    stream, size = _open(upload.source, upload.received)
    try:
        if size > settings.HUB_FETCH_MAX_SIZE:
            raise CodedError("upload_too_large", f"{upload.source} has {size} bytes; this hub fetches files up to "
                                                 f"{settings.HUB_FETCH_MAX_SIZE} bytes (HUB_FETCH_MAX_SIZE).")
        if upload.size != size:
            if upload.received:
                raise CodedError("fetch_failed", f"{upload.source} changed size while it was fetched.")
            with transaction.atomic():
                quota.check_adding(upload.owner, size)
                Upload.objects.filter(pk=upload.pk).update(size=size)
            upload.size = size
        log(f"fetching {size} bytes from {urlsplit(upload.source).netloc}"
            + (f", resuming at byte {upload.received}" if upload.received else ""))
        while upload.received < size:
            if time.monotonic() > deadline:
                raise CodedError("time_limit", f"The fetch read {upload.received} of {size} bytes in "
                                               f"{settings.HUB_FETCH_DEADLINE_S:.0f} s (HUB_FETCH_DEADLINE_S); "
                                               "run it again to resume.")
            start, reader = upload.received, _UntilBroken(stream)
            try:
                uploads.write_chunk(upload, reader, start, min(size, start + CHUNK))
            except HubError as exc:
                if exc.code != "upload_incomplete":
                    raise
                why = type(reader.error).__name__ if reader.error else "the server closed the connection"
                raise CodedError("fetch_failed", f"Reading stopped after byte {upload.received} ({why}); run the "
                                                 "fetch again to resume there.")
            if progress is not None:
                progress(upload.received / size if size else 1.0)
    finally:
        if stream is not None:
            stream.close()
    return uploads.complete_upload(upload)
