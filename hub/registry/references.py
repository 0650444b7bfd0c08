"""Data by reference: a version's file whose bytes stay where they live, on a file system the site declares
(``HUB_REFERENCE_ROOTS``: ``/lustre/project``) or in an S3 bucket (``s3://bucket/prefix``), never copied into the
hub's store. Its size and sha256 are read once, by the ``reference`` job, and again by fixity.

Every read resolves the path again and refuses one whose symbolic links now lead out of its root, so a link
changed after registration cannot make the hub serve another file. The web nodes and the workers must mount the
declared roots alike (a centre's parallel file system); nothing here is on one node's disk only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from hub.errors import HubError

S3 = "s3://"
CHUNK = 8 * 1024 * 1024


@dataclass
class Member:
    """One file of a reference: ``path`` inside it ("" for a reference to one file), its location and size."""

    path: str
    location: str
    size: int


def is_s3(location: str) -> bool:
    return location.startswith(S3)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _roots(s3: bool) -> list[str]:
    return [root for root in settings.HUB_REFERENCE_ROOTS if is_s3(root) == s3]


def _refused(location: str) -> HubError:
    roots = ", ".join(settings.HUB_REFERENCE_ROOTS) or "none: references are off here"
    return HubError("reference_not_allowed", f"{location} is not under a root this hub reads data in place from "
                                             f"(HUB_REFERENCE_ROOTS: {roots}). Upload the file, or ask the "
                                             "administrators to declare its file system.")


def check(location: str) -> str:
    """``location`` normalised (an absolute path or ``s3://bucket/key``) when it lies under a declared root, or
    a coded refusal: ``invalid`` for what is neither, ``reference_not_allowed`` outside every root (or a path
    whose links lead out of it)."""
    location = (location or "").strip()
    if is_s3(location):
        bucket, _, key = location[len(S3):].partition("/")
        if not bucket or not key or any(part in ("", ".", "..") for part in key.rstrip("/").split("/")):
            raise HubError("invalid", f"{location!r} is not s3://bucket/key.", errors={"reference": ["Bad URL."]})
        if not any(_within(location, root) for root in _roots(s3=True)):
            raise _refused(location)
        return location
    if not location.startswith("/") or "\x00" in location:
        raise HubError("invalid", "A reference is an absolute path (/lustre/…) or an S3 URL (s3://bucket/key).",
                       errors={"reference": ["Neither an absolute path nor s3://."]})
    normal = os.path.normpath(location)
    resolved(normal)
    return normal


def resolved(location: str) -> Path:
    """The real path of a path reference, checked again now: under the declared root it names, its links
    included; ``reference_not_allowed`` otherwise."""
    for root in _roots(s3=False):
        if _within(location, os.path.normpath(root)):
            real = os.path.realpath(location)
            if not _within(real, os.path.realpath(root)):
                raise HubError("reference_not_allowed", f"{location} is a symbolic link (or inside one) that leads "
                                                        f"out of {root}; reference the data where it lies.")
            return Path(real)
    raise _refused(location)


def _client():
    from minio import Minio

    conf = settings.HUB_REFERENCE_S3
    return Minio(conf["ENDPOINT"], access_key=conf["ACCESS_KEY"], secret_key=conf["SECRET_KEY"],
                 secure=bool(conf["SECURE"]), region=conf["REGION"])


def _bucket_key(location: str) -> tuple[str, str]:
    bucket, _, key = location[len(S3):].partition("/")
    return bucket, key


def members(location: str) -> list[Member]:
    """The files a reference names: itself, or every file under a folder (an S3 prefix ending in ``/``), in
    path order, at most ``HUB_REFERENCE_MAX_FILES``. ``FileNotFoundError`` when nothing is there."""
    limit = settings.HUB_REFERENCE_MAX_FILES
    found: list[Member] = []

    def add(member: Member) -> None:
        found.append(member)
        if len(found) > limit:
            raise HubError("reference_not_allowed", f"{location} holds more than {limit} files "
                                                    "(HUB_REFERENCE_MAX_FILES); reference a smaller folder.")

    if is_s3(location):
        bucket, key = _bucket_key(location)
        if not key.endswith("/"):
            return [Member("", location, _client().stat_object(bucket, key).size)]
        for obj in _client().list_objects(bucket, prefix=key, recursive=True):
            if not obj.is_dir:
                add(Member(obj.object_name[len(key):], f"{S3}{bucket}/{obj.object_name}", obj.size))
        if not found:
            raise FileNotFoundError(location)
        return sorted(found, key=lambda m: m.path)
    real = resolved(location)
    if not real.is_dir():
        return [Member("", location, real.stat().st_size)]
    for folder, dirs, files in os.walk(real):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            inner = os.path.join(location, path.relative_to(real).as_posix())
            if path.is_symlink():
                resolved(inner)  # a link inside the folder must stay under the root too
            if path.is_file():
                add(Member(path.relative_to(real).as_posix(), inner, path.stat().st_size))
    return found


def open_bytes(location: str, start: int = 0, length: int | None = None) -> BinaryIO:
    """The bytes of a referenced file from ``start`` (``length`` of them, or to the end)."""
    if is_s3(location):
        from hub.storage.s3 import Body

        bucket, key = _bucket_key(location)
        return Body(_client().get_object(bucket, key, offset=start, length=length or 0))
    handle = open(resolved(location), "rb")  # noqa: SIM115 - the caller closes it
    handle.seek(start)
    return handle if length is None else _Limited(handle, length)


class _Limited:
    """At most ``left`` bytes of a file, then end of file."""

    def __init__(self, handle: BinaryIO, left: int) -> None:
        self.handle, self.left = handle, left

    def read(self, size: int = -1) -> bytes:
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.handle.read(size)
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def digest(location: str, progress: Callable[[int], None] | None = None) -> tuple[str, int]:
    """(sha256, size) of a referenced file, read once; hashing one block overlaps reading the next."""
    from hub.registry.uploads import OverlappedHash

    hasher = OverlappedHash(hashlib.sha256())
    read = 0
    try:
        with open_bytes(location) as stream:
            while block := stream.read(CHUNK):
                hasher.update(block)
                read += len(block)
                if progress is not None:
                    progress(read)
    finally:
        result = hasher.finish()
    return result.hexdigest(), read


def folder_digest(files: list[dict]) -> str:
    """The sha256 a referenced folder is known by: over its files' paths, sizes and sha256s, in path order."""
    lines = "".join(f"{item['sha256']}  {item['size']}  {item['path']}\n" for item in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def download_url(location: str, filename: str, media_type: str) -> str | None:
    """A presigned URL to an S3 reference (the client reads it from the bucket), None for a path."""
    if not is_s3(location):
        return None
    bucket, key = _bucket_key(location)
    return _client().presigned_get_object(
        bucket, key, expires=timedelta(seconds=settings.HUB_STORAGE["S3_PRESIGN_SECONDS"]),
        response_headers={"response-content-disposition": f'attachment; filename="{filename}"',
                          "response-content-type": media_type})
