"""The gateway's message format between the web process and the workers: a JSON header and the raw
bytes of each array, so that no pickling (and no zip) is involved and decoding is a memory view.

``pack(meta, arrays)`` -> bytes; ``unpack(bytes)`` -> (meta, arrays). Layout: ``HGW1``, the header's
length (4 bytes, little endian), the header ``{"meta": ..., "arrays": [[name, dtype, shape], ...]}``,
then each array's bytes in C order.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import orjson

MAGIC = b"HGW1"


class WireError(ValueError):
    """A message that is not in the gateway's format."""


def pack(meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    return b"".join(parts(meta, arrays))


def parts(meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> list[bytes | memoryview]:
    """The message in pieces: the header, then each array's own memory (no copy of a C-ordered array), for
    a socket's ``sendmsg``; ``pack`` joins them."""
    arrays = arrays or {}
    pieces, specs = [], []
    for name, array in arrays.items():
        array = np.asarray(array)
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
            array = np.ascontiguousarray(array).reshape(array.shape)
        if array.dtype.hasobject:
            raise WireError(f"array {name!r} holds Python objects; only numeric and bool arrays can be sent.")
        specs.append([name, array.dtype.str, list(array.shape)])
        pieces.append(memoryview(array.reshape(-1)).cast("B"))
    header = orjson.dumps({"meta": meta, "arrays": specs}, option=orjson.OPT_SERIALIZE_NUMPY)
    return [MAGIC + struct.pack("<I", len(header)) + header, *pieces]


def unpack(message: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    if message[:4] != MAGIC or len(message) < 8:
        raise WireError("not a gateway message")
    (length,) = struct.unpack_from("<I", message, 4)
    try:
        header = orjson.loads(message[8 : 8 + length])
    except orjson.JSONDecodeError as exc:
        raise WireError(f"the header is not JSON ({exc})")
    view = memoryview(message)
    offset = 8 + length
    arrays = {}
    for name, dtype_str, shape in header["arrays"]:
        dtype = np.dtype(dtype_str)
        if dtype.hasobject:
            raise WireError(f"array {name!r} has an object dtype")
        size = math.prod(shape) * dtype.itemsize
        if offset + size > len(message):
            raise WireError(f"array {name!r} is truncated")
        arrays[name] = np.frombuffer(view[offset : offset + size], dtype=dtype).reshape(shape)
        offset += size
    return header["meta"], arrays
