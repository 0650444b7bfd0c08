"""A local cache of downloaded files keyed by sha256 (``HPCFAIR_CACHE``, default ``~/.cache/hpcfair``).

A file is fetched once per machine: later downloads of the same content, from any artifact, are local
copies (not links, so that editing a downloaded file never changes the cache). Partial downloads live
beside their blob as ``.incomplete`` and are resumed.

Version records (what ``resolve`` answers) are kept too, under their PID and ``owner/name@version``, so that
a pinned version whose files are cached can be used with no network (``HPCFAIR_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

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

    # --- version records ------------------------------------------------------------------------------

    def _record(self, ref: str) -> Path:
        return self.root / "versions" / f"{hashlib.sha256(ref.strip().encode()).hexdigest()}.json"

    def save_version(self, info: dict[str, Any]) -> None:
        """Keep a version record under its PID and ``owner/name@version`` (the pinned names of it); a cache
        that cannot be written (a shared, read-only one) keeps nothing, and nothing fails."""
        if not info.get("pid") or not info.get("artifact") or not info.get("version"):
            return
        data = json.dumps(info, default=str)
        for ref in (info["pid"], f"{info['artifact']}@{info['version']}"):
            if not self._write(self._record(ref), data):
                return

    def remember(self, ref: str, info: dict[str, Any]) -> None:
        """Keep ``info`` under an unpinned name (``owner/name``, ``owner/name@latest``) too: offline, that
        name resolves to the version it named when last used online (as Hugging Face's offline mode does)."""
        self._write(self._record(ref), json.dumps(info, default=str))

    def save_text(self, key: str, text: str) -> None:
        """Keep a text the hub made (a citation) under ``key``, for offline use."""
        self._write(self.root / "texts" / f"{hashlib.sha256(key.encode()).hexdigest()}.txt", text)

    def text(self, key: str) -> str | None:
        try:
            return (self.root / "texts" / f"{hashlib.sha256(key.encode()).hexdigest()}.txt").read_text()
        except OSError:
            return None

    def _write(self, path: Path, data: str) -> bool:
        """Write ``data`` to ``path`` whole (or not at all); False when the cache cannot be written."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(data)
            temporary.replace(path)
        except OSError:
            return False  # a read-only shared cache keeps nothing, and nothing fails
        return True

    def version(self, ref: str) -> dict[str, Any] | None:
        """The kept record of a pinned version (its PID or ``owner/name@version``), or None."""
        path = self._record(ref)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None
