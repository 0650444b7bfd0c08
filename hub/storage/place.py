"""Laying blobs out as files (a job's folder, an engine's model folder) without ever writing into a blob.

A store on this machine's disk gives hard links to its blobs, so an existing path in a laid-out folder may be
a blob itself: opening it for writing, even as a copy's target, would change the stored bytes of every file
that shares that content (a root worker ignores the blob's mode 0444). So every file is placed by one of two
moves that never open an existing path for writing:

- a hard link to the blob (``os.link``: refused by the kernel when the target exists);
- a copy written to a fresh name created with ``O_EXCL | O_NOFOLLOW`` (which cannot open an existing file or
  follow a link to one), then linked to its target and the fresh name removed.

A target that exists already is refused (``FileExistsError``): two files laid out on one path are a
collision the caller turns into a coded error, never an overwrite.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHUNK = 8 * 1024 * 1024


def place(target: Path, *, local: Path | None = None, opener: Callable[[], BinaryIO] | None = None,
          link: bool = True) -> Path:
    """Lay out one blob as ``target`` (which must not exist): a hard link to ``local`` (the blob's path on this
    disk) where possible and ``link`` is true, else a copy of ``local`` or of what ``opener()`` reads."""
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "already laid out", str(target))
    if link and local is not None:
        try:
            os.link(local, target)
            return target
        except FileExistsError:
            raise
        except OSError:
            pass  # another file system, or links not allowed there: a copy
    if local is None and opener is None:
        raise ValueError("place needs the blob's local path or a way to open it")
    fresh = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(6).hex()}.part")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as out, (open(local, "rb") if local is not None else opener()) as body:
            shutil.copyfileobj(body, out, CHUNK)
        os.link(fresh, target)  # never replaces: a target made meanwhile is refused
    finally:
        os.unlink(fresh)
    return target


def create(path: Path, data: bytes) -> Path:
    """A new file ``path`` holding ``data``; ``FileExistsError`` when the path is taken (a file laid out there
    may be a blob: it is never opened for writing)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def inside(folder: Path, path: str) -> Path:
    """``folder / path`` for a version's relative file path, refused (``ValueError``) when it would leave
    ``folder`` (absolute, ``..``, empty parts)."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{path!r} is not a relative path inside the folder")
    return folder.joinpath(*parts)
