"""A local cache of downloaded files keyed by sha256 (``HPCFAIR_CACHE``, default ``~/.cache/hpcfair``).

A file is fetched once per machine: later downloads of the same content, from any artifact, are local
copies (not links, so that editing a downloaded file never changes the cache). Partial downloads live
beside their blob as ``.incomplete`` and are resumed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hpcfair import settings


class Cache:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else settings.cache_dir()

    def path(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256[:2] / sha256

    def get(self, sha256: str) -> Path | None:
        path = self.path(sha256)
        return path if path.is_file() else None

    def copy_out(self, sha256: str, dest: str | Path) -> Path:
        """Copy the cached blob to ``dest`` (through a temporary name, so ``dest`` is never half written)."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        temporary = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(self.path(sha256), temporary)
        temporary.replace(dest)
        return dest
