"""The object-store interface: content-addressed blobs keyed by sha256."""

from __future__ import annotations

import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def blob_key(sha256: str) -> str:
    """The store key of a blob: ``ab/cd/abcd…`` keeps directories and listings small."""
    if not SHA256_RE.match(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def staged_key(key: str) -> str:
    """The store key of a staged object (``jobs/<id>/inputs.npz``, ``uploads/<id>/<part>``): under ``staging/``,
    apart from the blobs, and checked so that no key climbs out of it."""
    parts = key.split("/")
    if not key or any(part in ("", ".", "..") for part in parts[:-1]) or parts[-1] in (".", ".."):
        raise ValueError(f"not a staging key: {key!r}")
    return f"staging/{key}"


class StorageUnavailable(Exception):
    """The backend could not be reached or refused the operation."""


class BlobStore(ABC):
    """Stores immutable blobs by their sha256. Callers hash; stores only keep bytes."""

    name: str
    # Whether clients may send bytes to the store directly (presigned multipart URLs: hub.registry.direct).
    direct_uploads: bool = False

    @abstractmethod
    def exists(self, sha256: str) -> bool:
        """Whether the blob is stored."""

    @abstractmethod
    def put_file(self, src: Path, sha256: str) -> bool:
        """Store the file ``src`` (already hashed) as ``sha256``; ``src`` stays where it is.

        Returns True when the blob was new, False when identical content was already stored.
        """

    @abstractmethod
    def open(self, sha256: str, start: int = 0, length: int | None = None) -> BinaryIO:
        """A readable stream of ``length`` bytes (or to the end) from ``start``."""

    @abstractmethod
    def delete(self, sha256: str) -> None:
        """Remove the blob; removing a missing blob is not an error."""

    @abstractmethod
    def iter_blobs(self) -> Iterator[tuple[str, datetime]]:
        """Every stored blob as (sha256, last modified), for garbage collection."""

    @abstractmethod
    def check(self, timeout: float) -> None:
        """Raise StorageUnavailable unless the store answers within about ``timeout`` seconds and could
        take a blob (``/readyz``)."""

    # --- staging: what one node writes and another node or a worker reads (job inputs, upload chunks) --------

    @abstractmethod
    def put_staged(self, key: str, src: Path, *, move: bool = False) -> None:
        """Store the file ``src`` as the staged object ``key`` (replacing any); with ``move`` the caller gives
        ``src`` up (a rename where the store is a folder on the same filesystem), else it stays where it is."""

    @abstractmethod
    def open_staged(self, key: str) -> BinaryIO:
        """The staged object ``key`` as a stream; FileNotFoundError if it is not there."""

    @abstractmethod
    def remove_staged(self, prefix: str) -> None:
        """Remove the staged object ``prefix``, or every one in the folder ``prefix`` (``jobs/<id>/``); nothing
        there is no error."""

    @abstractmethod
    def iter_staged(self) -> Iterator[tuple[str, datetime]]:
        """Every staged object as (key without ``staging/``, last modified), for the collector."""

    def fetch_staged(self, key: str, dest: Path) -> Path:
        """Copy the staged object ``key`` to the local file ``dest`` (FileNotFoundError if it is gone)."""
        partial = dest.with_name(f"{dest.name}.fetching")
        try:
            with self.open_staged(key) as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out, 8 * 1024 * 1024)
            partial.replace(dest)
        finally:
            partial.unlink(missing_ok=True)
        return dest

    def staged_local(self, key: str) -> Path | None:
        """The staged object's own file, if the store is a local filesystem and it exists (else None)."""
        return None

    def local_path(self, sha256: str) -> Path | None:
        """A path the web server can send from directly, if the store is a local filesystem."""
        return None

    def download_url(self, sha256: str, filename: str, media_type: str) -> str | None:
        """A URL clients fetch the blob from directly (presigned), or None to stream it ourselves."""
        return None
