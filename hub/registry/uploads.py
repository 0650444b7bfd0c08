"""Staging of uploaded bytes: resumable upload sessions and streamed multipart files.

A resumable upload's chunks are parts in the object store (``staging/uploads/<id>/``) and its offset is a
column of its row, so its chunks may reach different web nodes; ``complete`` joins the parts, checks the
sha256 and stores the bytes as a blob, which a version then references from any node. A multipart form's
files are staged in ``HUB_UPLOAD_DIR`` for the one request that publishes them, hashed on the way.
"""

from __future__ import annotations

import hashlib
import html
import threading
import uuid
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.db import transaction
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone
from rest_framework.exceptions import ParseError
from rest_framework.parsers import DataAndFiles, MultiPartParser, get_encoding

from hub.errors import HubError
from hub.registry import quota
from hub.registry.models import Upload
from hub.storage import StorageUnavailable, get_blob_store

READ_CHUNK = 1024 * 1024


@dataclass
class StagedFile:
    """Bytes on local disk with a known sha256, ready to become a version's file."""

    path: str  # the file's path inside the version
    staged: Path
    sha256: str
    size: int
    upload: Upload | None = None  # the session it came from, marked consumed on success
    temporary: bool = False  # staged by this request: removed when the request ends
    location: str = ""  # data by reference (hub.registry.references): the bytes stay there, never copied

    def close(self) -> None:
        """Django's multipart parser closes the files it made when parsing fails; a staged file holds no
        open handle (the upload handler removes its bytes)."""


def upload_dir() -> Path:
    directory = Path(settings.HUB_UPLOAD_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def staged_path(upload: Upload) -> Path:
    """Where this node fetches a completed upload's bytes when publishing reads them (metadata derivation);
    removed when the version is saved. The bytes themselves are a blob in the object store."""
    return upload_dir() / f"{upload.id}.part"


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class OverlappedHash:
    """Feeds a sha256 in a helper thread, so hashing one block overlaps receiving and writing the next.

    hashlib releases the GIL on large buffers, so this uses a second core. At most one block is in
    flight: memory stays bounded by two blocks.
    """

    def __init__(self, digest: hashlib._Hash) -> None:
        self.digest = digest
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")
        self._pending: Future | None = None

    def update(self, block: bytes) -> None:
        if self._pending is not None:
            self._pending.result()
        self._pending = self._pool.submit(self.digest.update, block)

    def finish(self) -> hashlib._Hash:
        """Wait for the last block and return the digest."""
        try:
            if self._pending is not None:
                self._pending.result()
        finally:
            self._pool.shutdown(wait=True)
        return self.digest


class _HashCache:
    """Running sha256 states of uploads whose chunks this process wrote, keyed by upload id (at most
    ``capacity``: bounded whatever the traffic).

    When the chunks of an upload arrive in order at the same process (the usual case) the digest is ready at
    ``complete``; otherwise ``complete`` hashes the parts as it joins them. Correctness never depends on it.
    """

    def __init__(self, capacity: int = 64) -> None:
        self._items: OrderedDict[str, tuple[int, hashlib._Hash]] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity

    def take(self, key: str, offset: int) -> hashlib._Hash | None:
        with self._lock:
            item = self._items.pop(key, None)
        if offset == 0:
            return hashlib.sha256()
        if item is not None and item[0] == offset:
            return item[1]
        return None

    def put(self, key: str, offset: int, digest: hashlib._Hash) -> None:
        with self._lock:
            self._items[key] = (offset, digest)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def pop(self, key: str) -> tuple[int, hashlib._Hash] | None:
        with self._lock:
            return self._items.pop(key, None)


_hashes = _HashCache()


def open_upload(owner, size: int, filename: str = "", sha256: str = "") -> Upload:
    if size < 0:
        raise HubError("invalid", "size must be zero or more bytes.")
    if size > settings.HUB_UPLOAD_MAX_SIZE:
        raise HubError("upload_too_large", f"This hub accepts files up to {settings.HUB_UPLOAD_MAX_SIZE} bytes.")
    with transaction.atomic():  # the quota's check and the row it allows, under the person's lock (quota.lock)
        quota.check_adding(owner, size)
        return Upload.objects.create(
            owner=owner,
            size=size,
            filename=filename,
            expected_sha256=sha256.lower(),
            expires=timezone.now() + timedelta(hours=settings.HUB_UPLOAD_TTL_HOURS),
        )


def offset_of(upload: Upload) -> int:
    """How many bytes the hub holds for this upload (a column of its row: the same on every node)."""
    return upload.received if upload.state == Upload.State.OPEN else upload.size


def parse_content_range(header: str | None, length: int | None, total: int) -> tuple[int, int]:
    """``bytes START-END/TOTAL`` -> (start, end exclusive). No header: the whole file in one body."""
    if not header:  # the whole file: exactly the size the upload was opened for, checked before reading
        if length is None:
            raise HubError("invalid_range", "Send Content-Length or Content-Range with the chunk.")
        if length > total:
            raise HubError("upload_too_large", f"The body has {length} bytes but this upload was opened for {total}; "
                                               "open an upload of the file's real size.", size=total)
        if length < total:
            raise HubError("upload_size_mismatch", f"The body has {length} bytes but this upload was opened for "
                                                   f"{total}; send the rest with Content-Range: bytes START-END/"
                                                   f"{total}.", size=total)
        return 0, length
    try:
        unit, _, spec = header.strip().partition(" ")
        span, _, declared = spec.partition("/")
        first, _, last = span.partition("-")
        start, end = int(first), int(last) + 1
        declared_total = None if declared == "*" else int(declared)
    except ValueError:
        raise HubError("invalid_range", f"Content-Range {header!r} is not 'bytes START-END/TOTAL'.")
    if unit != "bytes" or start < 0 or end <= start:
        raise HubError("invalid_range", f"Content-Range {header!r} is not 'bytes START-END/TOTAL'.")
    if declared_total is not None and declared_total != total:
        raise HubError("upload_size_mismatch", f"This upload was opened for {total} bytes, not {declared_total}.")
    if end > total:
        raise HubError("invalid_range", f"The chunk ends at byte {end}, past the upload's size of {total} bytes.")
    if length is not None and length != end - start:
        raise HubError("invalid_range", f"Content-Range covers {end - start} bytes but the body has {length}.")
    return start, end


def _part_key(upload: Upload, start: int, end: int) -> str:
    # A request's own nonce: two requests racing for one offset never overwrite each other's part.
    return f"uploads/{upload.id}/{start:016d}-{end:016d}-{uuid.uuid4().hex[:12]}"


def _store(call):
    try:
        return call(get_blob_store())
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; send this chunk again shortly.")


def write_chunk(upload: Upload, stream: BinaryIO, start: int, end: int) -> int:
    """Store bytes [start, end) read from ``stream`` as one part in the object store; returns the new offset.

    The offset and the list of parts live in the upload's row, so the next chunk may reach any web node. A
    part is written first, then claimed by one conditional update (``received == start``): of two requests
    racing for one offset, one wins and the other is told the new offset. A broken connection keeps what
    arrived: the offset moves to it, and the client resumes there.
    """
    upload.refresh_from_db(fields=["state", "received", "parts"])
    if upload.state != Upload.State.OPEN:
        raise HubError("upload_not_open", f"This upload is {upload.state}; open a new one to send more bytes.")
    if upload.expires < timezone.now():
        raise HubError("upload_not_open", "This upload expired; open a new upload.")
    if start != upload.received:
        raise HubError("upload_offset_mismatch", f"The hub holds {upload.received} bytes of this upload; send "
                                                 f"the chunk starting at byte {upload.received}.",
                       offset=upload.received)
    local = upload_dir() / f"chunk-{uuid.uuid4().hex}.part"  # this request's own, removed when it ends
    digest = _hashes.take(str(upload.id), start)
    hasher = OverlappedHash(digest) if digest is not None else None
    try:
        got = 0
        try:
            with open(local, "wb") as handle:
                while got < end - start:
                    chunk = stream.read(min(READ_CHUNK, end - start - got))
                    if not chunk:
                        break
                    if hasher is not None:
                        hasher.update(chunk)
                    handle.write(chunk)
                    got += len(chunk)
        finally:
            digest = hasher.finish() if hasher is not None else None
        if got:
            key = _part_key(upload, start, start + got)
            _store(lambda store: store.put_staged(key, local, move=True))
            claimed = Upload.objects.filter(pk=upload.pk, state=Upload.State.OPEN, received=start).update(
                received=start + got, parts=[*upload.parts, key])
            if not claimed:
                _store(lambda store: store.remove_staged(key))
                upload.refresh_from_db(fields=["state", "received"])
                raise HubError("upload_busy", f"Another request wrote to this upload meanwhile; the hub holds "
                                              f"{upload.received} bytes, resume there.", offset=upload.received)
            upload.received, upload.parts = start + got, [*upload.parts, key]
            if digest is not None:
                _hashes.put(str(upload.id), upload.received, digest)
    finally:
        local.unlink(missing_ok=True)
    if got < end - start:
        raise HubError("upload_incomplete", f"The connection ended after byte {start + got}; resume from there.",
                       offset=start + got)
    return upload.received


def _assemble(upload: Upload, dest: Path, hashed: bool) -> str:
    """Join the upload's parts, in order, into ``dest`` on this node; their sha256, hashed on the way unless
    ``hashed`` (this process hashed every chunk as it came: then "")."""
    store = get_blob_store()
    hasher = None if hashed else OverlappedHash(hashlib.sha256())
    try:
        with open(dest, "wb") as out:
            for key in upload.parts:
                with store.open_staged(key) as part:
                    while block := part.read(READ_CHUNK * 8):
                        if hasher is not None:
                            hasher.update(block)
                        out.write(block)
    finally:
        digest = hasher.finish() if hasher is not None else None
    return digest.hexdigest() if digest is not None else ""


def complete_upload(upload: Upload, sha256: str = "") -> Upload:
    """Check size and sha256 of a fully sent upload, store its bytes as a blob and mark it completed: any
    node may then publish a version with it (its bytes are in the object store, as a direct upload's are)."""
    upload.refresh_from_db()
    if upload.state == Upload.State.COMPLETED:
        return upload
    if upload.state != Upload.State.OPEN:
        raise HubError("upload_not_open", f"This upload is {upload.state}.")
    expected = (sha256 or upload.expected_sha256).lower()
    if upload.expected_sha256 and sha256 and sha256.lower() != upload.expected_sha256:
        raise HubError("checksum_mismatch", "The sha256 given now differs from the one given when opening.")
    if upload.received != upload.size:
        raise HubError("upload_incomplete", f"The hub holds {upload.received} of {upload.size} bytes; send the "
                                            "rest first.", offset=upload.received)
    cached = _hashes.pop(str(upload.id))
    known = cached[1].hexdigest() if cached and cached[0] == upload.size else ""
    store = get_blob_store()
    single = store.staged_local(upload.parts[0]) if known and len(upload.parts) == 1 else None
    local = upload_dir() / f"complete-{uuid.uuid4().hex}.part"
    try:
        try:
            actual = known if single else (_assemble(upload, local, hashed=bool(known)) or known)
        except FileNotFoundError:
            raise HubError("upload_not_open", "The bytes of this upload are gone from the object store (it "
                                              "expired); open a new upload.")
        except StorageUnavailable:
            raise HubError("storage_unavailable", "The object store is unavailable; try completing again shortly.")
        if expected and actual != expected:
            raise HubError(
                "checksum_mismatch",
                f"The bytes received hash to sha256 {actual}, not {expected}: the file changed or was damaged "
                "on the way. Open a new upload and send it again.",
                sha256=actual,
            )
        _store(lambda store: store.put_file(single or local, actual))  # one part on this disk: a hard link
    finally:
        local.unlink(missing_ok=True)
    done = Upload.objects.filter(pk=upload.pk, state=Upload.State.OPEN).update(
        sha256=actual, state=Upload.State.COMPLETED, completed_at=timezone.now(), parts=[])
    upload.refresh_from_db()
    if not done and upload.state != Upload.State.COMPLETED:
        raise HubError("upload_not_open", f"This upload is {upload.state}.")
    _store(lambda store: store.remove_staged(f"uploads/{upload.id}/"))
    return upload


def abort_upload(upload: Upload) -> None:
    _hashes.pop(str(upload.id))
    _store(lambda store: store.remove_staged(f"uploads/{upload.id}/"))
    upload.state = Upload.State.ABORTED
    upload.save(update_fields=["state"])


class FolderMultiPartParser(DjangoMultiPartParser):
    """Django's multipart parser, keeping the folders in a file part's name: ``filename="1_Pooling/config.json"``
    becomes that path in the version, where Django's own parser keeps ``config.json`` only and a model
    folder's two ``config.json`` collide. The name is checked like every version path (``clean_path``): a
    leading ``/``, a ``..`` or a backslash is refused with ``invalid_path``, not silently cut."""

    def sanitize_file_name(self, file_name: str) -> str | None:
        file_name = "".join(char for char in html.unescape(file_name) if char.isprintable())
        return file_name or None


class FolderFormParser(MultiPartParser):
    """DRF's multipart parser with :class:`FolderMultiPartParser` (API clients that send a token)."""

    def parse(self, stream, media_type=None, parser_context=None) -> DataAndFiles:
        request = parser_context["request"]
        meta = {**request.META, "CONTENT_TYPE": media_type}
        try:
            data, files = FolderMultiPartParser(meta, stream, request.upload_handlers,
                                                get_encoding(parser_context)).parse()
        except MultiPartParserError as exc:
            raise ParseError(f"Multipart form parse error - {exc}") from exc
        return DataAndFiles(data, files)


def keep_folders(request: HttpRequest) -> None:
    """Make a Django request parse its multipart body with :class:`FolderMultiPartParser` too: a browser
    session's CSRF check reads ``request.POST`` before DRF's parser ever runs."""

    def parse_file_upload(meta, post_data):
        return FolderMultiPartParser(meta, post_data, request.upload_handlers, request.encoding).parse()

    request.parse_file_upload = parse_file_upload


class StagingUploadHandler(FileUploadHandler):
    """Django upload handler: writes each multipart file to the staging dir, hashing on the way.

    A file past ``HUB_UPLOAD_MAX_SIZE`` ends the request with a 413 (the parser stops; nothing after it
    is read, so no field can silently go missing). Every file it staged is removed by ``remove_staged``,
    which the view calls however the request ends."""

    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.created: list[Path] = []
        self.handle: BinaryIO | None = None

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.staged = upload_dir() / f"form-{uuid.uuid4().hex}.part"
        self.created.append(self.staged)
        self.handle = open(self.staged, "wb")  # noqa: SIM115
        self.digest = hashlib.sha256()
        self.size = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.size += len(raw_data)
        if self.size > settings.HUB_UPLOAD_MAX_SIZE:
            self._discard()
            raise HubError("upload_too_large", f"The file {self.file_name!r} is larger than this hub accepts "
                                               f"({settings.HUB_UPLOAD_MAX_SIZE} bytes); nothing was published.",
                           limit=settings.HUB_UPLOAD_MAX_SIZE)
        self.handle.write(raw_data)
        self.digest.update(raw_data)
        return None

    def file_complete(self, file_size: int) -> StagedFile:
        self.handle.close()
        return StagedFile(  # type: ignore[return-value]
            path=self.file_name, staged=self.staged, sha256=self.digest.hexdigest(), size=self.size,
            temporary=True,
        )

    def upload_interrupted(self) -> None:
        self._discard()

    def _discard(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.staged.unlink(missing_ok=True)

    def remove_staged(self) -> None:
        """Remove every file this request staged (a version keeps its own copy in the object store)."""
        if self.handle is not None:
            self.handle.close()
        for path in self.created:
            path.unlink(missing_ok=True)


def completed_files(owner, path: str, upload_id: str) -> list[StagedFile]:
    """A completed upload of ``owner`` as the file ``path`` of a new version; a referenced folder as its files,
    under ``path/``."""
    try:
        upload = Upload.objects.filter(pk=uuid.UUID(str(upload_id)), owner=owner).first()
    except ValueError:
        upload = None
    if upload is None:
        raise HubError("not_found", f"You have no upload {upload_id}.")
    if upload.state != Upload.State.COMPLETED:
        raise HubError("upload_not_open" if upload.state != Upload.State.OPEN else "upload_incomplete",
                       f"Upload {upload.id} is {upload.state}; only completed uploads become files.")
    if not upload.reference:
        return [StagedFile(path=path, staged=staged_path(upload), sha256=upload.sha256, size=upload.size,
                           upload=upload)]
    if not upload.parts:  # one referenced file
        return [StagedFile(path=path, staged=staged_path(upload), sha256=upload.sha256, size=upload.size,
                           upload=upload, location=upload.source)]
    return [StagedFile(path=f"{path}/{item['path']}", staged=staged_path(upload), sha256=item["sha256"],
                       size=item["size"], upload=upload if index == 0 else None, location=item["location"])
            for index, item in enumerate(upload.parts)]
