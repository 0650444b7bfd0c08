"""The local copies of model blobs that workers keep on their own disk, bounded in bytes and swept.

Where copies live (each a *root*; an *entry* is one child of a root):

- ``HUB_GATEWAY_MODEL_DIR/<sha256>.onnx``: a model file copied from an object store that is not a local
  filesystem (``hub.gateway.sessions.model_file``); entry = the file;
- ``HUB_GATEWAY_MODEL_DIR/with-data/<sha256>-<label>/``: a model with its ONNX external data beside it
  (``hub.gateway.sessions.model_path``); entry = the folder;
- ``VAR_DIR/generation/<digest>/``: a generation model's files (``hub.generation.engine.model_folder``).

Folders hold hard links to the store's blobs where they can (a filesystem store on the same device), else
copies. A folder names the blobs it holds in ``.blobs`` (one sha256 a line).

What is bounded is what the copies cost this disk: a file whose every link is inside the roots counts its size
once; one also linked from elsewhere (the filesystem store's own blob) costs nothing, until that blob is
deleted. Past ``HUB_WORKER_CACHE_MB``, entries are evicted least recently used first (an entry's mtime is its
last use: ``touch`` on use, and again when a process lets go of it). Never evicted or dropped:

- an entry some process holds (``hold``: a shared ``flock`` on the file or folder, which the kernel lets go of
  when the process dies; the sweep takes the exclusive lock, without waiting, before removing anything);
- an entry used in the last ``grace_s`` seconds (between a copy being made and a process taking hold of it).

The registry's deletion cannot reach a worker's disk, so each worker also drops, at start and every
``HUB_WORKER_CACHE_SWEEP_S`` (``workers.housekeeping.CacheSweepStep``), the entries holding a blob that no live
version references any more (``sweep(referenced=...)``).

This module is plain Python (no Django) except ``configured_roots``, ``still_referenced`` and ``enforce``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MANIFEST = ".blobs"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
LEFTOVER_S = 3600.0  # a hidden temporary (a copy or folder being made) older than this was left by a dead process


@dataclass(frozen=True)
class Root:
    """A folder of entries: ``files`` (``<sha256>.<ext>`` copies) or ``folders`` (with a ``.blobs`` list)."""

    path: Path
    kind: str  # "files" | "folders"


@dataclass
class Entry:
    path: Path
    last_used: float
    digests: set[str] | None  # None: unknown (a folder made before manifests): dropped by a sweep when free


@dataclass
class Report:
    dropped: list[Path] = field(default_factory=list)  # held deleted blobs (or an unknown set of them)
    evicted: list[Path] = field(default_factory=list)  # least recently used, for room
    held_bytes: int = 0  # what the copies cost this disk afterwards

    def __bool__(self) -> bool:
        return bool(self.dropped or self.evicted)


def write_manifest(folder: Path, digests: Iterable[str]) -> None:
    """Name the blobs a folder holds (written into the folder before it is renamed into place)."""
    from hub.storage.place import create

    create(folder / MANIFEST, "".join(f"{digest}\n" for digest in sorted(set(digests))).encode())


def touch(path: Path) -> None:
    """Mark ``path`` (an entry) as used now."""
    try:
        os.utime(path)
    except OSError:
        pass


class Hold:
    """A shared lock on an entry: while a process holds it, no sweep removes the entry."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    def release(self) -> None:
        if self.fd >= 0:
            touch(self.path)  # last used: until now
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.release()


def hold(path: Path) -> Hold | None:
    """A shared lock on the entry ``path`` (a file or a folder), and marks it used; None when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        if os.stat(path).st_ino != os.fstat(fd).st_ino:  # removed (and maybe remade) before the lock
            raise FileNotFoundError(path)
    except OSError:
        os.close(fd)
        return None
    touch(path)
    return Hold(path, fd)


def entry_of(path: Path, roots: Iterable[Root]) -> Path | None:
    """The entry that ``path`` (a file a session opens) belongs to, None when it is not under a root."""
    path = Path(path)
    for root in roots:
        try:
            relative = path.relative_to(root.path)
        except ValueError:
            continue
        if relative.parts and not relative.parts[0].startswith("."):
            first = root.path / relative.parts[0]
            if (root.kind == "files") == (len(relative.parts) == 1):
                return first
    return None


def _digests(path: Path, kind: str) -> set[str] | None:
    if kind == "files":
        stem = path.name.split(".", 1)[0]
        return {stem} if SHA256.match(stem) else None
    try:
        found = {line.strip() for line in (path / MANIFEST).read_text().splitlines() if line.strip()}
    except OSError:
        return None
    return found if all(SHA256.match(d) for d in found) else None


def entries(roots: Iterable[Root], now: float | None = None) -> list[Entry]:
    """The entries under ``roots``; hidden leftovers of dead processes (older than ``LEFTOVER_S``) are removed."""
    now = time.time() if now is None else now
    found = []
    for root in roots:
        try:
            children = list(os.scandir(root.path))
        except OSError:
            continue
        for child in children:
            try:
                stat = child.stat(follow_symlinks=False)
                is_dir = child.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if child.name.startswith("."):
                if now - stat.st_mtime > LEFTOVER_S:
                    _remove(Path(child.path))
                continue
            if is_dir != (root.kind == "folders"):
                continue
            found.append(Entry(Path(child.path), stat.st_mtime, _digests(Path(child.path), root.kind)))
    return found


def held_bytes(roots: Iterable[Root]) -> int:
    """What the copies under ``roots`` cost this disk: each file whose links are all under the roots, once."""
    inodes: dict[tuple[int, int], list[int]] = {}  # (device, inode) -> [size, links, links seen]
    for root in roots:
        for folder, _, names in os.walk(root.path):
            for name in names:
                try:
                    stat = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                seen = inodes.setdefault((stat.st_dev, stat.st_ino), [stat.st_size, stat.st_nlink, 0])
                seen[2] += 1
    return sum(size for size, links, seen in inodes.values() if seen >= links)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _remove_if_free(entry: Entry) -> bool:
    """Remove the entry unless a process holds it (an exclusive lock, without waiting, while removing)."""
    try:
        fd = os.open(entry.path, os.O_RDONLY | (os.O_DIRECTORY if entry.path.is_dir() else 0))
    except OSError:
        return False  # gone already
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        _remove(entry.path)
        return True
    finally:
        os.close(fd)


def sweep(roots: list[Root], max_bytes: int, *, grace_s: float = 60.0,
          referenced: Callable[[set[str]], set[str]] | None = None, now: float | None = None) -> Report:
    """Drop the entries holding blobs that ``referenced`` no longer names (when given), then evict the least
    recently used entries until the copies cost at most ``max_bytes`` (0: no bound). Entries held by a process
    or used in the last ``grace_s`` seconds stay."""
    now = time.time() if now is None else now
    report = Report()
    found = entries(roots, now)
    free = [entry for entry in found if now - entry.last_used >= grace_s]
    if referenced is not None:
        known = set().union(*(entry.digests for entry in free if entry.digests))
        live = referenced(known) if known else set()
        for entry in free:
            if (entry.digests is None or entry.digests - live) and _remove_if_free(entry):
                report.dropped.append(entry.path)
        free = [entry for entry in free if entry.path not in report.dropped]
    total = held_bytes(roots)
    if max_bytes:
        for entry in sorted(free, key=lambda e: e.last_used):
            if total <= max_bytes:
                break
            if _remove_if_free(entry):
                report.evicted.append(entry.path)
                total = held_bytes(roots)
    report.held_bytes = total
    return report


# --- the hub's configuration ---------------------------------------------------------------------------------


def configured_roots() -> list[Root]:
    from django.conf import settings

    models = Path(settings.HUB_GATEWAY_MODEL_DIR)
    return [Root(models, "files"), Root(models / "with-data", "folders"),
            Root(Path(settings.VAR_DIR) / "generation", "folders")]


def still_referenced(digests: set[str]) -> set[str]:
    """The digests among ``digests`` that a live version's file still references."""
    from hub.registry.models import File

    digests, live = sorted(digests), set()
    for start in range(0, len(digests), 500):
        live.update(File.objects.filter(blob_id__in=digests[start:start + 500], version__deleted_at__isnull=True)
                    .values_list("blob_id", flat=True).distinct())
    return live


def enforce() -> Report:
    """After a new copy was made: evict for room (no database question; the periodic sweep drops deleted ones)."""
    from django.conf import settings

    report = sweep(configured_roots(), settings.HUB_WORKER_CACHE_BYTES, grace_s=settings.HUB_WORKER_CACHE_GRACE_S)
    if report:
        log.info("local model copies: evicted %d for room; %d bytes held", len(report.evicted), report.held_bytes)
    return report
