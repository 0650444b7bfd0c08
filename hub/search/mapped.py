"""The search index's base on a host's disk, shared by every process of the host.

A base is one folder of ``.npy`` arrays (``base-<epoch>-<generation>``), written once by the host's one indexer
(whoever holds the folder's ``build.lock``) and memory-mapped read-only by every web process, so that the page
cache holds the index once per host and a process that starts maps it in milliseconds instead of building a
copy of its own. ``CURRENT`` names the newest base; it is replaced atomically, after the folder is complete.
An older base is removed once a newer one is published: the processes that mapped it keep their pages (a
mapping outlives the file's name) and move on at their next query.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

POINTER = "CURRENT"
LOCK = "build.lock"
FORMAT = 5  # raise when the arrays a base holds change: a base of another format is built again


class Strings(Sequence):
    """Strings as one UTF-8 buffer and their offsets: two arrays, so a million titles map from disk instead of
    living as a million Python objects in every process. ``find`` needs the strings in sorted order."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets

    @classmethod
    def of(cls, values: Iterable[str]) -> Strings:
        encoded = [value.encode("utf-8", "surrogatepass") for value in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        return self.blob[self.offsets[index]:self.offsets[index + 1]].tobytes().decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        """Each string's length in UTF-8 bytes."""
        return np.diff(self.offsets)

    def find(self, value: str) -> int | None:
        """The position of ``value`` among sorted strings, or None."""
        at = bisect.bisect_left(self, value)
        return at if at < len(self) and self[at] == value else None

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.blob": self.blob, f"{prefix}.offsets": self.offsets}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Strings:
        return cls(arrays[f"{prefix}.blob"], arrays[f"{prefix}.offsets"])


def base_name(epoch: str, generation: int) -> str:
    return f"base-{epoch}-{generation}"


def generation_of(name: str) -> int:
    """The generation a base named by ``base_name`` was built at."""
    return int(name.rsplit("-", 1)[1])


def pointed(root: Path) -> str | None:
    """The name of the newest published base, or None."""
    try:
        return (root / POINTER).read_text().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def stamp(root: Path) -> tuple[int, int] | None:
    """What changes when another base is published (cheap enough to ask at every query)."""
    try:
        status = os.stat(root / POINTER)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return status.st_ino, status.st_mtime_ns


def open_base(root: Path, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A published base's description and its arrays, mapped read-only. Raises FileNotFoundError when the base
    was removed meanwhile (a newer one was published: read the pointer again)."""
    folder = root / name
    meta = json.loads((folder / "meta.json").read_text())
    arrays = {}
    for path in folder.glob("*.npy"):
        # A plain ndarray over the mapping: np.memmap's own indexing costs ~10 us a call in Python.
        arrays[path.name[:-4]] = np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)
    return meta, arrays


def publish(root: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> str:
    """Write a base (complete before it is named), point ``CURRENT`` at it and remove older ones; its name."""
    root.mkdir(parents=True, exist_ok=True)
    name = base_name(meta["epoch"], meta["generation"])
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        for key, array in arrays.items():
            np.save(building / f"{key}.npy", np.ascontiguousarray(array), allow_pickle=False)
        (building / "meta.json").write_text(json.dumps({**meta, "format": FORMAT}))
        if (root / name).exists():
            shutil.rmtree(root / name)
        os.rename(building, root / name)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    fd, tmp = tempfile.mkstemp(prefix=".pointer-", dir=root)
    with os.fdopen(fd, "w") as out:
        out.write(name)
    os.replace(tmp, root / POINTER)
    for old in root.iterdir():
        if old.is_dir() and old.name != name and (old.name.startswith("base-") or old.name.startswith(".building-")
                                                  and _stale(old)):
            shutil.rmtree(old, ignore_errors=True)
    return name


def _stale(folder: Path, seconds: float = 3600) -> bool:
    """A half-written base of an indexer that died (another one may be writing a fresh one)."""
    with contextlib.suppress(FileNotFoundError):
        return time.time() - folder.stat().st_mtime > seconds
    return False


@contextlib.contextmanager
def indexer(root: Path, wait: bool) -> Iterator[bool]:
    """Hold the host's indexer lock while the block runs; yields whether it is held (``wait=False`` yields False
    at once when another process holds it). The kernel releases it if the holder dies."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def size_on_disk(root: Path) -> int:
    """Bytes of the published base (what the host's page cache holds for it)."""
    name = pointed(root)
    if name is None or not (root / name).is_dir():
        return 0
    return sum(path.stat().st_size for path in (root / name).iterdir())
