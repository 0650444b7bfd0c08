"""Direct uploads on the S3 backend: the client sends parts straight to the object store by presigned
multipart URLs, and the web workers carry none of the bytes.

The parts land on an object of their own (``data/<upload id>``) that no download can reach. Completing
the upload, the hub lists the parts itself (it does not trust the client's list), completes the multipart
upload, then reads the object back once to hash it (no local copy: publishing fetches only the files
metadata derivation reads). Only when the size and sha256 match does the object
become the blob (the store writes the blob's pointer to it: no copy); otherwise it is deleted and the
upload aborted, so nothing unchecked is ever published and nothing is left behind. Part URLs live
``HUB_S3_PRESIGN_SECONDS`` and are issued to the upload's owner only.
"""

from __future__ import annotations

import hashlib
import math
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from hub.errors import HubError
from hub.registry.models import Upload
from hub.registry.uploads import READ_CHUNK, OverlappedHash
from hub.storage import StorageUnavailable, get_blob_store

MAX_PARTS = 10_000  # S3's limit
URLS_PER_REQUEST = 100
CLAIM_TIMEOUT = timedelta(hours=1)


def staging_key(upload: Upload) -> str:
    """Where the parts are assembled; once checked, the object stays there and the blob points to it."""
    return f"data/{upload.id}"


def offered() -> bool:
    """Whether the configured store takes direct uploads."""
    return get_blob_store().direct_uploads


def part_count(upload: Upload) -> int:
    return max(1, math.ceil(upload.size / upload.part_size))


def part_length(upload: Upload, number: int) -> int:
    return min(upload.part_size, upload.size - (number - 1) * upload.part_size)


def start(upload: Upload) -> None:
    """Open the object store's multipart upload for a new upload session."""
    size = max(settings.HUB_STORAGE.get("S3_PART_SIZE", 16 * 1024 * 1024), 5 * 1024 * 1024)
    upload.part_size = max(size, math.ceil(upload.size / MAX_PARTS / (1024 * 1024)) * 1024 * 1024)
    upload.direct_id = _storage(lambda store: store.start_multipart(staging_key(upload)))
    upload.save(update_fields=["part_size", "direct_id"])


def _storage(call):
    try:
        return call(get_blob_store())
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; try again shortly.")
    except FileNotFoundError:
        raise HubError("upload_not_open", "The object store no longer has this upload; open a new one.")


def _open(upload: Upload) -> None:
    if upload.state != Upload.State.OPEN:
        raise HubError("upload_not_open", f"This upload is {upload.state}; open a new one to send more bytes.")


def received(upload: Upload) -> dict[int, tuple[int, str]]:
    """The parts the object store holds: number -> (size, etag)."""
    if upload.state != Upload.State.OPEN:
        return {}
    return _storage(lambda store: store.list_parts(staging_key(upload), upload.direct_id))


def describe(upload: Upload) -> dict:
    """What a client needs to send or resume: the part size and count, the parts already received."""
    parts = received(upload)
    return {"part_size": upload.part_size, "part_count": part_count(upload),
            "parts_received": sorted(number for number, (size, _) in parts.items()
                                     if size == part_length(upload, number)),
            "url_seconds": get_blob_store().presign_ttl.seconds}


def offset_of(upload: Upload) -> int:
    """The bytes held, counting whole parts only."""
    if upload.state != Upload.State.OPEN:
        return upload.size
    return sum(size for number, (size, _) in received(upload).items() if size == part_length(upload, number))


def part_urls(upload: Upload, numbers: list[int]) -> dict[str, str]:
    """Presigned PUT URLs of the given parts (short-lived; the caller checked that the upload is theirs)."""
    _open(upload)
    count = part_count(upload)
    if not numbers or len(numbers) > URLS_PER_REQUEST:
        raise HubError("invalid", f"Ask for 1 to {URLS_PER_REQUEST} part numbers at a time.")
    wrong = [n for n in numbers if not 1 <= n <= count]
    if wrong:
        raise HubError("invalid", f"This upload has parts 1 to {count}; there is no part {wrong[0]}.")
    key = staging_key(upload)
    return {str(n): _storage(lambda store, n=n: store.part_url(key, upload.direct_id, n)) for n in numbers}


def complete(upload: Upload, sha256: str = "") -> Upload:
    """Assemble the parts, read the object back once (its sha256 and size), and make it the blob
    only if it is what the client announced; a mismatch deletes it and aborts the upload.

    No transaction is held while the object is read (SQLite would block every writer meanwhile): the
    request claims the upload by setting ``completed_at`` while it is still open, and a second completion
    meanwhile is ``upload_busy``. A claim older than ``CLAIM_TIMEOUT`` (a request that died) is void."""
    expected = (sha256 or upload.expected_sha256).lower()
    if upload.expected_sha256 and sha256 and sha256.lower() != upload.expected_sha256:
        raise HubError("checksum_mismatch", "The sha256 given now differs from the one given when opening.")
    if upload.state == Upload.State.COMPLETED:
        return upload
    _open(upload)
    now = timezone.now()
    free = Q(completed_at__isnull=True) | Q(completed_at__lt=now - CLAIM_TIMEOUT)
    if not Upload.objects.filter(free, pk=upload.pk, state=Upload.State.OPEN).update(completed_at=now):
        current = Upload.objects.get(pk=upload.pk)
        if current.state == Upload.State.COMPLETED:
            return current
        _open(current)
        raise HubError("upload_busy", "Another request is completing this upload; wait for it to end.")
    try:
        rejected = _assemble_and_check(upload, expected)
    except BaseException:
        Upload.objects.filter(pk=upload.pk).update(completed_at=None)  # released: completing again may work
        raise
    if rejected is not None:  # final: nothing of it is left
        Upload.objects.filter(pk=upload.pk).update(state=Upload.State.ABORTED, completed_at=None)
        raise rejected
    upload.state, upload.completed_at = Upload.State.COMPLETED, timezone.now()
    upload.save(update_fields=["sha256", "state", "completed_at"])
    return upload


def _assemble_and_check(upload: Upload, expected: str) -> HubError | None:
    parts = received(upload)
    wanted = range(1, part_count(upload) + 1)
    missing = [n for n in wanted if n not in parts]
    if missing:
        raise HubError("upload_incomplete", f"The object store has not received part {missing[0]} (of "
                                            f"{len(wanted)}); send the missing parts first.",
                       offset=offset_of(upload), missing_parts=missing[:100])
    short = [n for n in wanted if parts[n][0] != part_length(upload, n)]
    if short:
        raise HubError("upload_size_mismatch", f"Part {short[0]} has {parts[short[0]][0]} bytes, not "
                                               f"{part_length(upload, short[0])}; send it again.", parts=short[:100])
    key = staging_key(upload)
    _storage(lambda store: store.complete_multipart(key, upload.direct_id, [(n, parts[n][1]) for n in wanted]))
    store = get_blob_store()
    try:
        actual, size = _read_back(store, key)
        passed = size == upload.size and (not expected or actual == expected)
        if passed:
            store.adopt(key, actual)
        else:
            store.remove_key(key)
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; try completing again shortly.")
    if passed:
        upload.sha256 = actual
        return None
    if size != upload.size:
        return HubError("upload_size_mismatch", f"The object store holds {size} bytes, not the {upload.size} "
                                                "announced; nothing was kept. Upload the file again.", size=size)
    return HubError("checksum_mismatch", f"The bytes the object store received hash to sha256 {actual}, not "
                                         f"{expected}: a part was damaged or changed on the way. Nothing was kept; "
                                         "upload the file again.", sha256=actual)


def _read_back(store, key: str) -> tuple[str, int]:
    """Hash the object (the hash overlapping the reads). No local copy is written: publishing fetches the
    files metadata derivation reads, and only those (``hub.registry.services``)."""
    hasher = OverlappedHash(hashlib.sha256())
    size = 0
    try:
        with store.open_key(key) as body:
            while block := body.read(READ_CHUNK * 8):
                hasher.update(block)
                size += len(block)
    finally:
        digest = hasher.finish()
    return digest.hexdigest(), size


def abort(upload: Upload) -> None:
    """Abort the multipart upload and remove what the store holds of it. A completed upload's object is a
    blob's bytes now: the blob collector removes it once nothing references it."""
    if upload.state != Upload.State.OPEN:
        return
    store = get_blob_store()
    try:
        store.abort_multipart(staging_key(upload), upload.direct_id)
        store.remove_key(staging_key(upload))
    except (StorageUnavailable, FileNotFoundError):
        pass  # the collector retries expired ones
