"""A landing page's preview of HDF5, NetCDF and Zarr files: the tree of groups and variables (from the
version's metadata), and for the first few variables their first values and a plot of a 1-D or 2-D slice,
made by the sandboxed reader (``hub.metadata.scientific``) and cached by the files' sha256 (content never
changes under a digest, so a cached preview is never stale)."""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache

from hub.errors import HubError
from hub.metadata import scientific
from hub.registry.models import File
from hub.storage import get_blob_store
from hub.storage.base import StorageUnavailable

log = logging.getLogger(__name__)

PLOTTED = 3  # variables per file given values and a plot
MAX_UNITS = 4  # files (or stores) previewed per page
MAX_STORE_FILES = 2000


def previews(metadata: dict[str, Any], files: list[File]) -> list[dict[str, Any]]:
    """Per described file: {path, format, attributes, groups: [{path, variables}], shown: [previews]}."""
    described = {d["path"]: d for d in metadata.get("scientific") or [] if isinstance(d, dict)}
    out = []
    for name, members in scientific.units(files):
        found = described.get(name)
        if found is None or len(out) >= MAX_UNITS:
            continue
        variables = found.get("variables") or []
        groups = [{"path": g, "variables": [v for v in variables if (v["path"].rsplit("/", 1)[0] or "/") == g]}
                  for g in found.get("groups") or ["/"]]
        out.append({"path": name, "format": found.get("format"), "attributes": found.get("attributes") or {},
                    "groups": [g for g in groups if g["variables"] or g["path"] == "/"],
                    "read": found.get("read", True), "shown": _shown(name, members)})
    return out


def _shown(name: str, members: list[File]) -> list[dict[str, Any]]:
    """The first variables' values and plots, from the cache or the sandboxed reader; [] when the file is too
    large to preview, cannot be fetched now, or is refused."""
    if sum(m.size for m in members) > settings.HUB_SCIDATA_PREVIEW_MAX_BYTES or len(members) > MAX_STORE_FILES:
        return []
    key = "scipreview:" + hashlib.sha256("\n".join(f"{m.path} {m.blob_id}" for m in members).encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached
    folder = Path(tempfile.mkdtemp(prefix="hub-scipreview-"))
    try:
        local = []
        for index, member in enumerate(members):
            path = folder / str(index)
            with get_blob_store().open(member.blob_id, 0, member.size) as stream, path.open("wb") as out:
                shutil.copyfileobj(stream, out, 1024 * 1024)
            local.append((member.path, path))
        shown = scientific.read_unit(name, local, auto=PLOTTED)["previews"]
    except (FileNotFoundError, StorageUnavailable, OSError):
        log.info("no preview of %s now", name, exc_info=True)
        return []
    except HubError as exc:
        shown = [{"variable": "", "refused": exc.detail}]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cache.set(key, shown, settings.HUB_SCIDATA_PREVIEW_CACHE_S)
    return shown
