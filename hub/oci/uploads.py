"""Blob uploads (the specification's push workflow): a session per ``POST``, chunks staged in the object store
(``oci/<upload id>/<index>``, so any node takes the next chunk), and the closing ``PUT ?digest=`` that hashes
the bytes, checks the digest and stores the blob under it. The store's existing blobs are never written to: a
blob already there is only linked to the repository (``RepoBlob``)."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest

from hub.oci import body
from hub.oci.errors import OciError
from hub.oci.models import BlobUpload, RepoBlob
from hub.registry.uploads import upload_dir
from hub.storage import get_blob_store

CHUNK = 1024 * 1024


def _spool(request: HttpRequest, limit: int) -> tuple[Path, int]:
    """The request body in a fresh local file (at most ``limit`` bytes): (path, size)."""
    path = upload_dir() / f"oci-{uuid.uuid4().hex}.part"
    size, read = 0, body.reader(request)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            while block := read(CHUNK):
                size += len(block)
                if size > limit:
                    raise OciError("SIZE_INVALID", f"A blob here is at most {settings.HUB_UPLOAD_MAX_SIZE} bytes "
                                                   "(HUB_UPLOAD_MAX_SIZE).")
                out.write(block)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path, size


def start(repository: str, user) -> BlobUpload:
    """A new upload session."""
    return BlobUpload.objects.create(repository=repository, user=user)


def append(upload: BlobUpload, request: HttpRequest) -> BlobUpload:
    """Add the request body as the next chunk. A ``Content-Range: <start>-<end>`` must start where the upload
    stands (else the specification's 416)."""
    declared = request.headers.get("Content-Range", "").strip()
    if declared:
        start_text = declared.removeprefix("bytes ").removeprefix("bytes=").split("-", 1)[0]
        if not start_text.isdigit() or int(start_text) != upload.received:
            raise OciError("BLOB_UPLOAD_RANGE", f"This upload holds {upload.received} bytes; the next chunk "
                                                f"starts at {upload.received}, not {declared!r}.",
                           detail={"received": upload.received})
    path, size = _spool(request, settings.HUB_UPLOAD_MAX_SIZE - upload.received)
    if size == 0:
        path.unlink(missing_ok=True)
        return upload
    key = f"oci/{upload.id}/{len(upload.chunks):06d}"
    get_blob_store().put_staged(key, path, move=True)
    with transaction.atomic():
        locked = BlobUpload.objects.select_for_update().get(pk=upload.pk)
        if locked.received != upload.received:
            raise OciError("BLOB_UPLOAD_RANGE", "Another chunk of this upload arrived meanwhile; send chunks one "
                                                "after the other.", detail={"received": locked.received})
        locked.chunks = [*locked.chunks, key]
        locked.received += size
        locked.save(update_fields=["chunks", "received"])
    return locked


def store_file(path: Path, expected: str, repository: str) -> RepoBlob:
    """Hash the local file ``path``, check it against ``expected`` and keep it as a blob of ``repository``."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(8 * CHUNK):
            digest.update(block)
            size += len(block)
    actual = digest.hexdigest()
    if actual != expected:
        raise OciError("DIGEST_INVALID", f"The bytes sent hash to sha256:{actual}, not the digest given "
                                         f"(sha256:{expected}).", detail={"digest": f"sha256:{actual}"})
    store = get_blob_store()
    if not store.exists(actual):
        store.put_file(path, actual)
    blob, _ = RepoBlob.objects.get_or_create(repository=repository, digest=actual, defaults={"size": size})
    return blob


def finish(upload: BlobUpload, request: HttpRequest, expected: str) -> RepoBlob:
    """Close ``upload`` with the ``PUT``'s body as its last chunk: the blob, stored and linked."""
    upload = append(upload, request)
    store = get_blob_store()
    path = upload_dir() / f"oci-{upload.id.hex}-{uuid.uuid4().hex}.part"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            for key in upload.chunks:
                with store.open_staged(key) as chunk:
                    while block := chunk.read(8 * CHUNK):
                        out.write(block)
        blob = store_file(path, expected, upload.repository)
    finally:
        path.unlink(missing_ok=True)
    store.remove_staged(f"oci/{upload.id}/")
    upload.delete()
    return blob


def monolithic(request: HttpRequest, repository: str, expected: str) -> RepoBlob:
    """``POST ?digest=`` with the whole blob as the body."""
    path, _ = _spool(request, settings.HUB_UPLOAD_MAX_SIZE)
    try:
        return store_file(path, expected, repository)
    finally:
        path.unlink(missing_ok=True)


def cancel(upload: BlobUpload) -> None:
    get_blob_store().remove_staged(f"oci/{upload.id}/")
    upload.delete()
