"""Serving a file's bytes: ``Range`` (206, 416), ``ETag`` = sha256 with ``If-None-Match`` (304), and on a store
that offers it a redirect to a presigned URL. One implementation for every surface that hands out bytes: the REST
API's file download and the Hugging Face Hub protocol's ``resolve`` (``hub.hfhub``), which adds its own headers."""

from __future__ import annotations

import re

from django.db.models import F
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse

from hub.errors import HubError
from hub.registry import references
from hub.registry.files_access import record_card, require_files
from hub.registry.models import Artifact, File
from hub.storage import StorageUnavailable, get_blob_store

_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")

# Raster formats a page may show inline (an SVG could carry script).
INLINE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """A single ``bytes=`` range as (start, end exclusive); None means the whole file.

    Malformed or multi-range headers are ignored (RFC 9110 allows that); unsatisfiable ones are 416.
    """
    if not header:
        return None
    match = _RANGE_RE.match(header.strip())
    if not match or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if first:
        start = int(first)
        end = min(int(last) + 1, size) if last else size
        if start >= size or (last and int(last) < start):
            raise HubError("invalid_range", f"The file has {size} bytes; range {header!r} is outside it.",
                           size=size)
    else:  # suffix: the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise HubError("invalid_range", f"Range {header!r} asks for no bytes.", size=size)
        start, end = max(size - suffix, 0), size
    return start, end


class BlockFileResponse(FileResponse):
    """A file sent in 1 MiB reads. Django's 4 KiB default costs a Python round per 4 KiB on a server
    without ``wsgi.file_wrapper`` (granian); one that has it still sends the file with ``sendfile``."""

    block_size = 1024 * 1024


def _changed(file: File) -> HubError:
    when = f" on {file.location_changed.date().isoformat()}" if file.location_changed else ""
    return HubError("reference_changed", f"{file.path!r} is data by reference, at {file.location}, and the data "
                                         f"there changed{when} or is gone: the hub no longer serves it. Its record "
                                         "and PID stay; ask the owner where the data went.", location=file.location)


def open_reference(file: File, start: int, length: int):
    """A path reference's bytes [start, start+length), refused (``reference_changed``) once its size differs from
    the registered one (a cheap check on every read; fixity compares the sha256)."""
    real = references.resolved(file.location)
    if real.stat().st_size != file.size:
        raise _changed(file)
    return references.open_bytes(file.location, start, length)


def count_download(artifact: Artifact, range_header: str | None) -> None:
    """One download per transfer started: a resumed or partial read (a Range not from 0) is not counted."""
    if not range_header or range_header.strip().startswith("bytes=0-"):
        Artifact.objects.filter(pk=artifact.pk).update(downloads=F("downloads") + 1)


def file_response(request: HttpRequest, artifact: Artifact, file: File, *, inline: bool = False,
                  head: bool = False, refused: str = "access_restricted") -> HttpResponse:
    """``file``'s bytes for ``request`` (a Django or DRF request): 200, 206 for a ``Range``, 304 for a matching
    ``If-None-Match``, or a 302 to a presigned URL on a store that offers one. ``inline`` shows an image rather
    than saving it and is not counted; ``head`` answers the same status and headers without opening the bytes
    (and counts nothing). Restricted and embargoed files are a coded 403 ``refused`` to those without a grant or a
    share link (``hub.registry.files_access``), before any byte, ETag or presigned URL; the card the hub wrote
    from the record is read as the record is (``record_card``)."""
    if not record_card(file):
        require_files(request, file.version, code=refused)
    etag = f'"{file.blob_id}"'
    if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        response = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    range_header = request.headers.get("Range")
    if not inline and not head:
        count_download(artifact, range_header)
    store = get_blob_store()
    filename = file.path.rsplit("/", 1)[-1]
    try:
        if file.location:
            if file.location_changed:
                raise _changed(file)
            url = references.download_url(file.location, filename, file.media_type)
        else:
            url = store.download_url(file.blob_id, filename, file.media_type)
        if url:
            response = HttpResponseRedirect(url)
            response["ETag"] = etag
            return response
        byte_range = parse_range(range_header, file.size)
        start, end = byte_range or (0, file.size)
        if head:
            response = HttpResponse(content_type=file.media_type)
            response["Content-Length"] = str(end - start)
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
        elif file.location:
            local, stream = None, open_reference(file, start, end - start)
            response = BlockFileResponse(stream, as_attachment=not inline, filename=filename,
                                         content_type=file.media_type)
            response["Content-Length"] = str(end - start)
        else:
            local = store.local_path(file.blob_id)
            stream = store.open(file.blob_id, start, end - start)
            if local is not None:
                response = BlockFileResponse(stream, as_attachment=not inline, filename=filename,
                                             content_type=file.media_type)
            else:
                response = StreamingHttpResponse(iter(lambda: stream.read(1024 * 1024), b""),
                                                 content_type=file.media_type)
                response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{filename}"'
                response["Content-Length"] = str(end - start)
    except FileNotFoundError:
        if file.location:
            raise _changed(file)
        raise HubError("storage_unavailable", f"The bytes of {file.path!r} are missing from the object store; "
                                              "the administrators have been told.")
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; try again shortly.")
    response["ETag"] = etag
    response["Accept-Ranges"] = "bytes"
    if byte_range:
        response.status_code = 206
        response["Content-Range"] = f"bytes {start}-{end - 1}/{file.size}"
    return response
