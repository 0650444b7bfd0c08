"""safetensors files read as data: the header is JSON (tensor names, dtypes, shapes, offsets) behind an
8-byte length, so parameter counts and dtypes come from it without loading, unpickling or executing
anything. Safe in the web process."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit
BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
         "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


class NotSafetensors(ValueError):
    """The file is not a readable safetensors file; the message says why."""


def header(path: Path) -> dict[str, Any]:
    """The tensor table of ``path``, checked: every entry a known dtype, a shape of non-negative ints and
    offsets inside the file that match the shape."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise NotSafetensors(f"{path.name} is shorter than a safetensors header.")
        (length,) = struct.unpack("<Q", head)
        if length > min(MAX_HEADER, size - 8):
            raise NotSafetensors(f"{path.name} does not start with a safetensors header (length {length}).")
        try:
            table = json.loads(handle.read(length))
        except (UnicodeDecodeError, ValueError, RecursionError):  # nesting deeper than Python's stack: not a table
            raise NotSafetensors(f"{path.name}'s safetensors header is not JSON.") from None
    if not isinstance(table, dict):
        raise NotSafetensors(f"{path.name}'s safetensors header is not a table of tensors.")
    data = size - 8 - length
    for name, entry in table.items():
        if name == "__metadata__":
            continue
        ok = isinstance(entry, dict) and entry.get("dtype") in BYTES and isinstance(entry.get("shape"), list) \
            and all(isinstance(d, int) and d >= 0 for d in entry["shape"]) \
            and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
        if ok:
            start, end = entry["data_offsets"]
            count = 1
            for d in entry["shape"]:
                count *= d
            ok = isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= data \
                and end - start == count * BYTES[entry["dtype"]]
        if not ok:
            raise NotSafetensors(f"{path.name}: tensor {str(name)[:80]!r} has an invalid entry in the header.")
    return table


def facts(path: Path) -> dict[str, Any]:
    """Parameter count, parameters per dtype, tensor count and the file's own string metadata."""
    table = header(path)
    per_dtype: dict[str, int] = {}
    tensors = 0
    for name, entry in table.items():
        if name == "__metadata__":
            continue
        count = 1
        for d in entry["shape"]:
            count *= d
        per_dtype[entry["dtype"]] = per_dtype.get(entry["dtype"], 0) + count
        tensors += 1
    out: dict[str, Any] = {"parameters": sum(per_dtype.values()), "dtypes": per_dtype, "tensors": tensors}
    metadata = table.get("__metadata__")
    if isinstance(metadata, dict):
        out["safetensors_metadata"] = {str(k)[:100]: str(v)[:500] for k, v in list(metadata.items())[:50]}
    return out
