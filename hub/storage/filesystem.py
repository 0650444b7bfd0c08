"""Filesystem blob store (the embedded default): ``<root>/ab/cd/<sha256>``."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from hub.storage.base import SHA256_RE, BlobStore, StorageUnavailable, blob_key, staged_key
from hub.storage.ranges import RangeFile


class FileSystemBlobStore(BlobStore):
    name = "filesystem"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, sha256: str) -> Path:
        return self.root / blob_key(sha256)

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).is_file()

    def put_file(self, src: Path, sha256: str) -> bool:
        dest = self._path(sha256)
        if dest.is_file():
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{sha256}.{uuid.uuid4().hex}.tmp")
        try:
            # A hard link costs nothing on the same filesystem; a copy works across filesystems.
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        try:
            os.chmod(tmp, 0o444)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def open(self, sha256: str, start: int = 0, length: int | None = None) -> BinaryIO:
        handle = open(self._path(sha256), "rb")  # noqa: SIM115 - the caller closes it
        return RangeFile(handle, start, length)

    def delete(self, sha256: str) -> None:
        self._path(sha256).unlink(missing_ok=True)

    def check(self, timeout: float) -> None:
        """The root (or, before the first blob, the nearest folder that would hold it) is writable."""
        folder = self.root
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
            raise StorageUnavailable("the blob folder is not a writable directory")

    def iter_blobs(self) -> Iterator[tuple[str, datetime]]:
        if not self.root.is_dir():
            return
        for path in self.root.glob("*/*/*"):
            if SHA256_RE.match(path.name):
                yield path.name, datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)

    def put_staged(self, key: str, src: Path, *, move: bool = False) -> None:
        dest = self.root / staged_key(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if move:
            try:
                os.replace(src, dest)  # the same filesystem: a rename, no byte copied
                return
            except OSError:
                pass
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(src, tmp)  # a copy, not a link: the caller may go on writing to ``src``
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        if move:
            src.unlink(missing_ok=True)

    def staged_local(self, key: str) -> Path | None:
        path = self.root / staged_key(key)
        return path if path.is_file() else None

    def open_staged(self, key: str) -> BinaryIO:
        return open(self.root / staged_key(key), "rb")  # noqa: SIM115 - the caller closes it

    def remove_staged(self, prefix: str) -> None:
        target = self.root / staged_key(prefix.rstrip("/"))
        if target.is_file():
            target.unlink(missing_ok=True)
        else:
            shutil.rmtree(target, ignore_errors=True)

    def iter_staged(self) -> Iterator[tuple[str, datetime]]:
        base = self.root / "staging"
        if not base.is_dir():
            return
        for path in base.rglob("*"):
            try:
                if path.is_file() and not path.name.startswith("."):
                    yield (path.relative_to(base).as_posix(),
                           datetime.fromtimestamp(path.stat().st_mtime, tz=UTC))
            except FileNotFoundError:
                continue

    def local_path(self, sha256: str) -> Path | None:
        path = self._path(sha256)
        return path if path.is_file() else None
