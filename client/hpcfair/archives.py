"""Archives read within limits: how much a zip (an ``.npz`` is one) may inflate to, checked before inflating.

An 815 KB ``.npz`` of zeros inflates to 800 MB, and an ``.npy`` header may declare a shape far larger than
the bytes behind it (numpy allocates the array before reading). Both are refused here from the archive's
directory and the arrays' headers, which cost a few KB to read. ``zipfile`` itself never inflates a member
past the size its directory declares, so the declared sizes bound the memory.
"""

from __future__ import annotations

import io
import math
import re
import stat
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

MAX_MEMBERS = 10_000
DEFAULT_MAX_INFLATED = 4 * 1024**3  # what the hub's workers allow unless configured (HUB_ARCHIVE_INFLATE_MAX_MB)


def unsafe_member(info: zipfile.ZipInfo) -> bool:
    """Whether a zip member would unpack outside the folder it is unpacked into: an absolute path, a drive
    letter, '..' (with either slash), or a symbolic link."""
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in name.split("/"):
        return True
    return stat.S_ISLNK(info.external_attr >> 16)


class ArchiveTooLarge(ValueError):
    """The archive would inflate past the limit (or holds too many members)."""


def check_zip(archive: zipfile.ZipFile, max_inflated: int, name: str = "the archive") -> int:
    """How many bytes inflating ``archive`` adds to its own (stored members add none); ArchiveTooLarge past
    ``max_inflated`` or ``MAX_MEMBERS``. What was sent or stored as it is counts against other limits."""
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise ArchiveTooLarge(f"{name} holds {len(members)} members; the limit is {MAX_MEMBERS}.")
    added = sum(max(info.file_size - info.compress_size, 0) for info in members)
    if added > max_inflated:
        total = sum(info.file_size for info in members)
        raise ArchiveTooLarge(f"{name} inflates to {total / 2**20:.1f} MiB; compressed members may add at most "
                              f"{max_inflated / 2**20:.1f} MiB. Send the arrays uncompressed (np.savez, .npy) "
                              "or as a dataset artifact.")
    return added


def check_npz(archive: zipfile.ZipFile, max_inflated: int, name: str = "the .npz") -> None:
    """``check_zip``, and each array's header: the shape it declares must fit in the member's bytes."""
    check_zip(archive, max_inflated, name)
    for info in archive.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with archive.open(info) as member:
            try:
                version = npy_format.read_magic(member)
                reader = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
                shape, _, dtype = reader(member, max_header_size=10_000)
            except (ValueError, EOFError, SyntaxError):
                continue  # not a plain array: np.load says what is wrong
            declared = math.prod(shape) * dtype.itemsize
            if declared > info.file_size:
                raise ValueError(f"array {info.filename[:-4]!r} of {name} declares shape {list(shape)} "
                                 f"({declared} bytes) but holds {info.file_size} bytes.")


def read_npz(source: bytes | str | Path | BinaryIO, max_inflated: int, name: str = "the .npz"
             ) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (no pickles), checked by ``check_npz`` first. ArchiveTooLarge, or ValueError /
    OSError / zipfile.BadZipFile for an unreadable file."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    with zipfile.ZipFile(handle) as archive:
        check_npz(archive, max_inflated, name)
    if hasattr(handle, "seek"):
        handle.seek(0)
    with np.load(handle, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}
