"""RGB images as PNG bytes with zlib and the PNG chunk layout alone (no imaging library): the fine-tune's
learning curve and the slices of scientific files are drawn as numpy arrays and written here."""

from __future__ import annotations

import struct
import zlib
from typing import Any


def encode(image: Any) -> bytes:
    """An RGB uint8 array (height, width, 3) as PNG bytes (filter 0 on every row)."""
    height, width, _ = image.shape
    raw = b"".join(b"\0" + image[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
