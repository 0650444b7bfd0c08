"""Large transfers at the speed of the disk and the network: big blocks, the sha256 computed while the bytes
pass (never a second read of a finished file), several connections with HTTP ``Range`` where the server
offers ranges, and resumption after a cut.

Downloads write ``<target>.incomplete`` strictly in order, so that a cut leaves a valid prefix: the next run
hashes that prefix once and asks for the rest. Blocks are fetched by several connections at once but
written and hashed in order; a bounded window of blocks waits in memory for its turn.

Uploads read each block once: the same bytes are sent and hashed. On the hub's resumable sessions the
blocks go in order; on presigned multipart uploads (the S3 backend) parts go in parallel, straight to the
object store, and the parts the store already holds are only hashed.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import urllib3

BLOCK = 16 * 1024 * 1024  # one ranged request, one multipart part at most (the hub sets part sizes)
READ = 8 * 1024 * 1024  # one read of a file or a response
CONNECTIONS = int(os.environ.get("HPCFAIR_CONNECTIONS", "4"))
DROPPED = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
           urllib3.exceptions.HTTPError)


class HashThread:
    """A sha256 fed in order by a helper thread: hashlib releases the GIL on large buffers, so hashing one
    block overlaps receiving, sending or writing the next. At most ``depth`` blocks wait for it."""

    def __init__(self, digest: Any = None, depth: int = 2) -> None:
        self.digest = digest or hashlib.sha256()
        self.size = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def restart(self) -> None:
        """Start over with an empty digest (the server sent the whole file again)."""
        self.close()
        self.__init__()  # type: ignore[misc]

    def _run(self) -> None:
        while (block := self._queue.get()) is not None:
            self.digest.update(block)

    def update(self, block: bytes | memoryview) -> None:
        self.size += len(block)
        self._queue.put(block)  # type: ignore[arg-type]

    def hexdigest(self) -> str:
        """Wait for the blocks still queued and return the digest; the thread ends."""
        self.close()
        return self.digest.hexdigest()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()


def hash_prefix(path: Path, length: int) -> Any:
    """The sha256 state of the first ``length`` bytes of ``path`` (a resumed transfer's earlier bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while length > 0 and (chunk := handle.read(min(READ, length))):
            digest.update(chunk)
            length -= len(chunk)
    return digest


class TransferFailed(Exception):
    """The transfer stopped; what was written stays for a resume. ``code``: the client error code."""

    def __init__(self, message: str, code: str = "transfer_failed") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Source:
    """Where a download's bytes come from. ``open(headers)`` sends one GET (``stream=True``); after the hub
    redirected to a presigned URL, ``refresh()`` asks the hub again (a presigned URL expires)."""

    get: Callable[[str, dict[str, str]], requests.Response]  # (url, headers) -> response
    url: str
    refresh: Callable[[], str] | None = None
    retries: int = 5
    backoff: float = 0.5
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch(self, start: int, end: int | None) -> tuple[requests.Response, bool]:
        """An open response for bytes [start, end) (None: to the end) and whether the server answered the
        range (206)."""
        failures = 0
        while True:
            url = self.url
            try:
                response = self.get(url, {"Range": f"bytes={start}-{'' if end is None else end - 1}"})
                if response.status_code in (206, 200):
                    return response, response.status_code == 206
                response.close()
                if response.status_code in (401, 403) and self.refresh is not None:
                    with self._lock:  # an expired presigned URL: one fresh URL for every connection
                        if self.url == url:
                            self.url = self.refresh()
                    failures += 1
                elif response.status_code in (429, 500, 502, 503, 504):
                    failures += 1
                else:
                    raise TransferFailed(f"the server answered {response.status_code} for bytes from {start}",
                                         code="transfer_failed")
            except DROPPED:
                failures += 1
            if failures > self.retries:
                raise TransferFailed(f"bytes from {start}: failed after {failures} tries; run it again to resume")
            time.sleep(self.backoff * 2 ** (failures - 1))


def download(source: Source, size: int, sha256: str, partial: Path, progress: Callable[[int], None], *,
             connections: int | None = None, block: int | None = None) -> None:
    """Complete ``partial`` to ``size`` bytes and check its sha256 (raises ``TransferFailed``; a mismatch
    removes the file). A cut keeps the prefix written so far."""
    connections, block = connections or CONNECTIONS, block or BLOCK
    have = partial.stat().st_size if partial.exists() else 0
    if have > size:
        partial.unlink()
        have = 0
    hasher = HashThread(hash_prefix(partial, have) if have else None)
    hasher.size = have
    progress(have)
    try:
        with open(partial, "ab") as out:
            if have < size:
                _fill(source, size, have, out, hasher, progress, connections, block)
        actual = hasher.hexdigest()
    finally:
        hasher.close()
    if partial.stat().st_size != size or actual != sha256:
        partial.unlink()
        raise TransferFailed("the bytes received do not match the hub's size and sha256; run it again",
                             code="checksum_mismatch")


def _fill(source: Source, size: int, have: int, out, hasher: HashThread, progress: Callable[[int], None],
          connections: int, block: int) -> None:
    """Stream the first block (all of a small file) on one connection, resuming inside it after a drop;
    the rest in parallel blocks when the server answered the range."""
    position, end, failures = have, size, 0
    if connections > 1 and size - have >= 2 * block:
        end = have + block
    while position < end:
        response, ranged = source.fetch(position, None if end == size else end)
        if not ranged:  # the server ignores ranges: the whole file comes, replacing what is here
            out.truncate(0)
            hasher.restart()
            progress(-position)
            position, end = 0, size
        with response:
            try:
                while position < end and (chunk := response.raw.read(min(READ, end - position))):
                    out.write(chunk)
                    hasher.update(chunk)
                    progress(len(chunk))
                    position += len(chunk)
            except DROPPED:
                pass
        if position < end:
            failures += 1
            if failures > source.retries:
                raise TransferFailed(f"the connection broke {failures} times; run it again to resume")
            time.sleep(source.backoff * 2 ** (failures - 1))
    if end < size:
        _parallel_blocks(source, end, size, lambda data: (out.write(data), hasher.update(data), progress(len(data))),
                         connections, block)


def _parallel_blocks(source: Source, start: int, size: int, write: Callable[[bytes], None], connections: int,
                     block: int) -> None:
    """Fetch [start, size) in blocks over ``connections`` connections; ``write`` them in order."""
    spans = [(offset, min(offset + block, size)) for offset in range(start, size, block)]

    def fetch(index: int) -> bytes:
        first, end = spans[index]
        data, tries = b"", 0
        while len(data) < end - first:  # a dropped connection resumes inside the block
            tries += 1
            if tries > source.retries + 1:
                raise TransferFailed(f"bytes {first}-{end - 1} kept breaking off; run it again to resume")
            response, ranged = source.fetch(first + len(data), end)
            with response:
                if not ranged:
                    raise TransferFailed("the server stopped answering ranges")
                try:
                    data += response.raw.read(end - first - len(data))
                except DROPPED:
                    continue
        return data

    in_order(len(spans), fetch, lambda _index, data: write(data), connections)


def in_order(count: int, produce: Callable[[int], bytes], consume: Callable[[int, bytes], None],
             connections: int) -> None:
    """``produce(i)`` for i in range(count) on ``connections`` threads, ``consume(i, result)`` in order on
    this one. At most ``2 * connections`` results wait in memory; the first error stops everything and is
    raised here (what was consumed stays consumed: a resume goes on from there)."""
    results: dict[int, bytes] = {}
    state: dict[str, Any] = {"next": 0, "consumed": 0, "error": None}
    ready = threading.Condition()
    window = 2 * connections

    def worker() -> None:
        while True:
            with ready:
                while state["next"] >= state["consumed"] + window and state["error"] is None:
                    ready.wait()
                index = state["next"]
                if index >= count or state["error"] is not None:
                    return
                state["next"] += 1
            try:
                data = produce(index)
            except Exception as exc:  # noqa: BLE001 - raised in the consuming thread
                with ready:
                    state["error"] = state["error"] or exc
                    ready.notify_all()
                return
            with ready:
                results[index] = data
                ready.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(connections, count)))]
    for thread in threads:
        thread.start()
    try:
        for index in range(count):
            with ready:
                while index not in results and state["error"] is None:
                    ready.wait()
                if index not in results:
                    raise state["error"]
                data = results.pop(index)
            consume(index, data)
            with ready:
                state["consumed"] = index + 1
                ready.notify_all()
    finally:
        with ready:
            if state["error"] is None and state["consumed"] < count:
                state["error"] = TransferFailed("stopped")
            ready.notify_all()
        for thread in threads:
            thread.join()


class FileBody:
    """``length`` bytes of a file from ``offset`` as a request body (requests sends it with Content-Length,
    one large write per block); each block is read once and hashed as it is sent."""

    def __init__(self, handle, offset: int, length: int, hashed: Callable[[int, bytes], None]) -> None:
        self.handle, self.offset, self.length, self.hashed = handle, offset, length, hashed

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        position, end = self.offset, self.offset + self.length
        while position < end:
            chunk = os.pread(self.handle.fileno(), min(READ, end - position), position)
            if not chunk:
                raise OSError("the file became shorter while it was sent")
            self.hashed(position, chunk)
            position += len(chunk)
            yield chunk


class PrefixHash:
    """The sha256 of a file's first ``upto`` bytes, fed with blocks at any offset: bytes it has seen are not
    hashed twice (a chunk sent again after a cut), bytes it skipped are read once to catch up."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hasher = HashThread()
        self.upto = 0

    def feed(self, offset: int, data: bytes) -> None:
        if offset > self.upto:
            self._catch_up(offset)
        if offset + len(data) > self.upto:
            self.hasher.update(data[self.upto - offset:] if offset < self.upto else data)
            self.upto = offset + len(data)

    def _catch_up(self, offset: int) -> None:
        with open(self.path, "rb") as handle:
            handle.seek(self.upto)
            while self.upto < offset and (chunk := handle.read(min(READ, offset - self.upto))):
                self.hasher.update(chunk)
                self.upto += len(chunk)

    def hexdigest(self, size: int) -> str:
        if self.upto < size:
            self._catch_up(size)
        return self.hasher.hexdigest()
