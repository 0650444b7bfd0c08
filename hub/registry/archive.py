"""A version's files as one zip, streamed: nothing is written to disk or held whole in memory, whatever the
storage backend. Members are stored (not compressed: model weights and data rarely shrink, and the sha256 of
each file stays checkable against the version's record)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

from hub.registry import references
from hub.registry.models import Version
from hub.storage import get_blob_store

BLOCK = 1024 * 1024


class _Pipe(io.RawIOBase):
    """Where the zip writer writes; the response takes what was written after each block."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


def zip_stream(version: Version, extra: dict[str, bytes] | None = None) -> Iterator[bytes]:
    """The bytes of a zip holding every file of ``version`` under its path, after the ``extra`` members
    (name -> bytes; one the version has a file of the same name for is left out)."""
    store = get_blob_store()
    pipe = _Pipe()
    stamp = version.created.timetuple()[:6]
    paths = set(version.files.values_list("path", flat=True))
    with zipfile.ZipFile(pipe, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, data in (extra or {}).items():
            if name not in paths:
                archive.writestr(zipfile.ZipInfo(name, date_time=stamp), data)
                yield pipe.take()
        for file in version.files.order_by("path"):
            info = zipfile.ZipInfo(file.path, date_time=stamp)
            info.file_size = file.size
            with archive.open(info, "w", force_zip64=file.size >= 2**31) as member, \
                    (references.open_bytes(file.location, 0, file.size) if file.location
                     else store.open(file.blob_id, 0, file.size)) as source:
                while block := source.read(BLOCK):
                    member.write(block)
                    yield pipe.take()
            yield pipe.take()
    yield pipe.take()
