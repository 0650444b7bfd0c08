"""Moving version files between the object store and a job's private directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from hub.registry.models import Version
from hub.registry.uploads import StagedFile, sha256_of_file
from hub.storage import get_blob_store


def fetch(version: Version, path: str, dest_dir: Path, *, link: bool = False) -> Path:
    """Copy ``path`` of ``version`` out of the object store into ``dest_dir`` (under its base name). With
    ``link``, for a reader in this process tree only (no sandbox), a store on this machine's disk gives a
    symbolic link to its blob instead (blobs are never changed in place)."""
    file = version.files.select_related("blob").get(path=path)
    dest = dest_dir / Path(path).name
    store = get_blob_store()
    if link and (local := store.local_path(file.blob_id)) is not None and local.exists():
        dest.symlink_to(local)
        return dest
    with store.open(file.blob_id) as stream, open(dest, "wb") as out:
        shutil.copyfileobj(stream, out, 8 * 1024 * 1024)
    return dest


def staged(path: Path, name: str) -> StagedFile:
    """A local file, hashed, ready to become a file ``name`` of a new version."""
    return StagedFile(path=name, staged=path, sha256=sha256_of_file(path), size=path.stat().st_size)
