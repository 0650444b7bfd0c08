"""A file object limited to a byte range, that servers can still ``sendfile`` from."""

from __future__ import annotations

import io
from typing import BinaryIO


class RangeFile(io.RawIOBase):
    """Reads ``length`` bytes of ``handle`` from ``start``.

    ``fileno()`` and ``tell()`` are those of the underlying file, so a server's ``wsgi.file_wrapper``
    (gunicorn's sendfile path) sends exactly Content-Length bytes from the current offset without copying
    through Python; other servers (granian) iterate over ``read()``.
    """

    def __init__(self, handle: BinaryIO, start: int = 0, length: int | None = None) -> None:
        super().__init__()
        self._handle = handle
        size = handle.seek(0, io.SEEK_END)
        self._start = min(start, size)
        self._end = size if length is None else min(size, self._start + length)
        handle.seek(self._start)

    @property
    def remaining(self) -> int:
        return self._end - self._handle.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        remaining = self.remaining
        if remaining <= 0:
            return b""
        return self._handle.read(remaining if size is None or size < 0 else min(size, remaining))

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return self._handle.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            target = self._end + offset
        elif whence == io.SEEK_CUR:
            target = self._handle.tell() + offset
        else:
            target = offset
        return self._handle.seek(max(self._start, min(target, self._end)))

    def fileno(self) -> int:
        return self._handle.fileno()

    def close(self) -> None:
        self._handle.close()
        super().close()
