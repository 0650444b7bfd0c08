"""Previews on a landing page: the first lines of a text file, the first rows of a CSV/TSV as a table, and
raster images shown as they are. Only data formats are read here (never a model file: those are only
opened in the conversion sandbox), only their first bytes, and only for a few files per page."""

from __future__ import annotations

import csv
import io
from typing import Any

from hub.registry.models import File
from hub.storage import get_blob_store
from hub.storage.base import StorageUnavailable

HEAD_BYTES = 16 * 1024
TEXT_LINES = 40
TABLE_ROWS = 10
MAX_PREVIEWS = 6
TEXT_SUFFIXES = (".txt", ".md", ".json", ".yaml", ".yml", ".py", ".cfg", ".toml", ".ini", ".log", ".def")
TABLE_SUFFIXES = (".csv", ".tsv")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # raster only: an SVG can carry script


def previews(files: list[File]) -> dict[int, dict[str, Any]]:
    """File id -> what to show: {"kind": "table", "header", "rows"}, {"kind": "text", "text"} or
    {"kind": "image"}; files without a preview are left out."""
    out: dict[int, dict[str, Any]] = {}
    for file in files:
        if len(out) >= MAX_PREVIEWS:
            break
        name = file.path.lower()
        if file.media_type in IMAGE_TYPES:
            out[file.pk] = {"kind": "image"}
        elif name.endswith(TABLE_SUFFIXES + TEXT_SUFFIXES) and file.size:
            head = _head(file)
            if head is None:
                continue
            shown = _table(head, name.endswith(".tsv"), file.size > HEAD_BYTES) if name.endswith(TABLE_SUFFIXES) \
                else None
            out[file.pk] = shown or {"kind": "text", "text": "\n".join(head.splitlines()[:TEXT_LINES]),
                                     "cut": file.size > HEAD_BYTES or len(head.splitlines()) > TEXT_LINES}
    return out


def _head(file: File) -> str | None:
    """The file's first bytes as text, or None when they are not text (or cannot be read now)."""
    try:
        with get_blob_store().open(file.blob_id, 0, min(file.size, HEAD_BYTES)) as stream:
            data = stream.read(HEAD_BYTES)
    except (FileNotFoundError, StorageUnavailable, OSError):
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def _table(head: str, tabs: bool, cut: bool) -> dict[str, Any] | None:
    lines = head.splitlines()
    if cut and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut in the middle
    rows = list(csv.reader(io.StringIO("\n".join(lines)), csv.excel_tab if tabs else csv.excel))
    if not rows or len(rows[0]) < 2 and not tabs:
        return None
    width = len(rows[0])
    body = [row for row in rows[1:TABLE_ROWS + 1] if len(row) == width]
    return {"kind": "table", "header": rows[0], "rows": body}
