"""The object-store interface: content-addressed blobs keyed by sha256."""

from __future__ import annotations

import re
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

    def local_path(self, sha256: str) -> Path | None:
        """A path the web server can send from directly, if the store is a local filesystem."""
        return None

    def download_url(self, sha256: str, filename: str, media_type: str) -> str | None:
        """A URL clients fetch the blob from directly (presigned), or None to stream it ourselves."""
        return None
