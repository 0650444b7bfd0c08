"""GGUF models (llama.cpp's format) described for their metadata: a file is GGUF by its magic bytes, whatever
its name; its first ``HUB_GGUF_HEADER_MB`` are copied for the sandbox child (``hpcfair.convert.child``, task
``gguf``, which calls ``hpcfair.gguf_facts``) under a memory cap and a deadline. What the child refuses (a
header that lies about its counts, lengths or offsets, or is too large) is a 400 with its code; a child that
runs out of memory or time is a 400 ``gguf_invalid``."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.sandbox import Limits, run
from hpcfair.gguf_facts import is_gguf

from hub.errors import HubError

log = logging.getLogger(__name__)

SUFFIX = ".gguf"
SNIFFED = (SUFFIX, ".bin", "")  # names under which a GGUF file is looked for by its first bytes
REFUSALS = {"gguf_invalid", "gguf_too_large"}
MAX_FILES = 8  # GGUF files described per version (a model's quantizations, its split parts)


def gguf_files(files: Sequence[Any]) -> list[Any]:
    """The files among ``files`` (``FileInfo``s) that are GGUF by their first bytes; a ``.gguf`` file that is not
    is refused (400 ``gguf_invalid``)."""
    found = []
    for info in files:
        suffix = Path(info.path.lower()).suffix
        if suffix not in SNIFFED or info.size < 24:
            if suffix == SUFFIX:
                raise HubError("gguf_invalid", f"{info.path} is too short to be a GGUF file.")
            continue
        if is_gguf(info.head(4)):
            found.append(info)
        elif suffix == SUFFIX:
            raise HubError("gguf_invalid", f"{info.path} is named .gguf but does not start with GGUF's magic "
                                           "bytes; upload the file llama.cpp wrote.")
    return found


def read(info: Any) -> dict[str, Any]:
    """The facts of one GGUF file (``hpcfair.gguf_facts.describe``), read by the sandbox child."""
    work = Path(tempfile.mkdtemp(prefix="hub-gguf-"))
    try:
        # A copy (never a link: the folder is the child's) of the header's bytes only; the size says the rest.
        (work / "head.gguf").write_bytes(info.head(min(info.size, settings.HUB_GGUF_HEADER_MB * 1024 * 1024)))
        limits = Limits(memory_mb=settings.HUB_GGUF_MEMORY_MB, cpu_seconds=settings.HUB_GGUF_WALL_S,
                        wall_seconds=settings.HUB_GGUF_WALL_S, threads=1, file_mb=settings.HUB_GGUF_HEADER_MB + 1,
                        uid=settings.HUB_CONVERT_UID, gid=settings.HUB_CONVERT_GID)
        hidden = [Path(p) for p in (settings.VAR_DIR, settings.HUB_STORAGE.get("DIR"), settings.HUB_UPLOAD_DIR) if p]
        try:
            return run({"task": "gguf", "source": "head.gguf", "size": info.size}, work, limits, hide=hidden)
        except ConversionError as exc:
            if exc.code in REFUSALS:
                raise HubError(exc.code, f"{info.path}: {exc.detail}") from None
            log.warning("GGUF read of %s failed: %s %s", info.path, exc.code, exc.detail)
            raise HubError("gguf_invalid", f"{info.path} could not be read as GGUF within the hub's limits "
                                           f"({settings.HUB_GGUF_MEMORY_MB} MB, {settings.HUB_GGUF_WALL_S} s): "
                                           f"{exc.detail}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def facts(files: Sequence[Any]) -> dict[str, Any]:
    """``{"format": "gguf", "framework": "other", "gguf": {path: facts}, "parameters", "quantization"}`` for a
    model version holding GGUF files (the first one's count and quantization); {} for one without."""
    found = gguf_files(files)[:MAX_FILES]
    if not found:
        return {}
    described = {info.path: read(info) for info in found}
    first = described[found[0].path]
    return {"format": "gguf", "framework": "other", "gguf": described, "parameters": first["parameters"],
            "quantization": first["quantization"]}
