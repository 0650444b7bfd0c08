"""The bytes a registry answer carries: a stored blob (``Range``, a presigned redirect on S3), small generated
bytes (a config or manifest), with ``Docker-Content-Digest`` and the API version header."""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse

from hub.errors import HubError
from hub.oci.errors import API_VERSION
from hub.registry.downloads import BlockFileResponse, parse_range
from hub.storage import StorageUnavailable, get_blob_store


def finish(response: HttpResponse, hex_digest: str | None = None) -> HttpResponse:
    response[API_VERSION[0]] = API_VERSION[1]
    if hex_digest:
        response["Docker-Content-Digest"] = f"sha256:{hex_digest}"
        response["ETag"] = f'"sha256:{hex_digest}"'
    return response


def content(request: HttpRequest, data: bytes, media_type: str, *, head: bool) -> HttpResponse:
    """Bytes held in memory (a manifest, a config), ranged as a blob is."""
    hex_digest = hashlib.sha256(data).hexdigest()
    byte_range = parse_range(request.headers.get("Range"), len(data)) if data else None
    start, end = byte_range or (0, len(data))
    response = HttpResponse(b"" if head else data[start:end], content_type=media_type)
    response["Content-Length"] = str(end - start)
    response["Accept-Ranges"] = "bytes"
    if byte_range:
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
    return finish(response, hex_digest)


def stored(request: HttpRequest, hex_digest: str, size: int, media_type: str, *, head: bool) -> HttpResponse:
    """A blob of the store: 200, 206 for a ``Range``, or a 307 to a presigned URL where the store has them."""
    store = get_blob_store()
    try:
        url = store.download_url(hex_digest, hex_digest, media_type)
        if url:
            return finish(HttpResponseRedirect(url), hex_digest)
        byte_range = parse_range(request.headers.get("Range"), size) if size else None
        start, end = byte_range or (0, size)
        if head:
            response = HttpResponse(content_type=media_type)
        else:
            stream = store.open(hex_digest, start, end - start)
            if store.local_path(hex_digest) is not None:
                response = BlockFileResponse(stream, content_type=media_type)
            else:
                response = StreamingHttpResponse(iter(lambda: stream.read(1024 * 1024), b""), content_type=media_type)
        response["Content-Length"] = str(end - start)
    except FileNotFoundError:
        raise HubError("storage_unavailable", "The blob's bytes are missing from the object store; the "
                                              "administrators have been told.")
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; try again shortly.")
    response["Accept-Ranges"] = "bytes"
    if byte_range:
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    return finish(response, hex_digest)
