"""The gateway's message format between the web process and the workers: a JSON header and the raw
bytes of each array, so that no pickling (and no zip) is involved and decoding is a memory view.

``pack(meta, arrays)`` -> bytes; ``unpack(bytes)`` -> (meta, arrays). Layout: ``HGW1``, the header's
length (4 bytes, little endian), the header ``{"meta": ..., "arrays": [[name, dtype, shape], ...]}``,
then each array's bytes in C order.

``parts`` gives the same message in pieces, each array from its own memory, for ZeroMQ's multipart frames
(``hub.gateway.channel``) and ``sendmsg``. ``send_frame``/``recv_frame`` carry a message over a stream socket
(an engine's socket pair with its parent) with a small JSON control header.
"""

from __future__ import annotations

import math
import socket
import struct
from typing import Any

import numpy as np
import orjson

MAGIC = b"HGW1"
_FRAME, _HEAD = struct.Struct("<Q"), struct.Struct("<I")
_IOV_MAX = 512  # pieces per sendmsg (Linux allows 1024)


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


# --- frames on a stream socket -------------------------------------------------------------------------


def frame(control: dict[str, Any], message: bytes | memoryview | list) -> list[memoryview]:
    """One frame in pieces: its length, the control header's length, the header (JSON), then the message
    (bytes, or the pieces ``parts`` makes: arrays are sent from their own memory)."""
    head = orjson.dumps(control)
    pieces = [memoryview(piece).cast("B") for piece in (message if isinstance(message, list) else [message])]
    total = _HEAD.size + len(head) + sum(len(piece) for piece in pieces)
    return [memoryview(_FRAME.pack(total) + _HEAD.pack(len(head)) + head), *(p for p in pieces if len(p))]


def send_frame(sock: socket.socket, control: dict[str, Any], message: bytes | memoryview | list) -> None:
    """One frame (``frame``) on a stream socket."""
    pending = frame(control, message)
    while pending:
        sent = sock.sendmsg(pending[:_IOV_MAX])
        while sent:
            if sent >= len(pending[0]):
                sent -= len(pending.pop(0))
            else:
                pending[0], sent = pending[0][sent:], 0


def _recv_exact(sock: socket.socket, size: int, into: bytearray | None = None) -> bytearray | None:
    buffer = into if into is not None else bytearray(size)
    view, got = memoryview(buffer)[:size], 0
    while got < size:
        count = sock.recv_into(view[got:], size - got)
        if count == 0:
            return None
        got += count
    return buffer


def recv_frame(sock: socket.socket, reuse: bytearray | None = None) -> tuple[dict[str, Any], memoryview] | None:
    """The next frame: its control header and its message (a view of the frame's buffer; ``reuse`` is
    filled when it is large enough, so that a child does not fault in new pages for every batch); None when
    the other side closed the socket."""
    size = _recv_exact(sock, _FRAME.size)
    if size is None:
        return None
    (length,) = _FRAME.unpack(size)
    body = _recv_exact(sock, length, reuse if reuse is not None and len(reuse) >= length else None)
    if body is None:
        return None
    view = memoryview(body)[:length]
    (head,) = _HEAD.unpack_from(view)
    return orjson.loads(view[_HEAD.size:_HEAD.size + head]), view[_HEAD.size + head:]


def wait_at_most(sock: socket.socket, seconds: float) -> None:
    """Receive timeouts in the kernel (``SO_RCVTIMEO``; a receive past it raises ``BlockingIOError``): a
    blocking socket with a Python timeout polls before every receive, which costs a round trip a quarter of
    its time."""
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole,
                                                                         max(int((seconds - whole) * 1e6), 1)))
