"""The lanes' shortcut on one host: a web process hands a synchronous run straight to a lane engine of a
worker on the same host, over Unix sockets that the worker announces, so the run's inputs and answer
never pass through Redis (or the file lane's folders). Issue 39: a run crossed three processes (web, Redis,
engine) where the floor's stays in one, and the lane was 0.55-0.95 ms of a 1.1-1.9 ms request.

- **The worker** (``workers.gateway``) makes two sockets per device lane (``Listener``) in a private folder
  (mode 0700, under ``TMPDIR``): a datagram socket and a listening socket. It announces their addresses with
  the host's identity (``host()``) beside its presence on the lane (``Lane.announce(..., local=...)``). Its
  lane engines share both: whichever is idle reads the next datagram or accepts the next connection
  (``hub.gateway.engine.serve_datagrams``, ``serve_local``), so the sockets' queues are the lane's queue, as
  the Redis list is for the others.
- **A web process** (``call``) looks up the addresses announced for the device (at most every
  ``REFRESH_S``) and keeps those of its own host. A run that fits one datagram (``wire.DATAGRAM_BYTES``) is
  sent as one from the thread's own datagram socket (an abstract address the kernel picks), and its answer
  comes back as one: no connection to make, two system calls a side (issue 39: a connection per run cost
  0.1-0.15 ms of a 0.8 ms request). Only a datagram from the lane's socket with the run's id is taken; an
  answer too large for one comes over the lane. A larger run connects, sends and reads the answer on that
  one connection. The registry's generation is checked first against the one this process heard
  announced (``RedisLane.generation_heard``: a subscription to the bumps, read without a round trip), so
  that a stale request is refused (``Stale``) before anything is sent, as the lane refuses it; when the
  process is not sure it hears (just started, the subscription lost) it asks the lane alongside the run
  (its ``GET`` goes out before the request and is read after the answer), and a stale answer is discarded.
- **Everything else goes over the lane as before**: no local engine announced (remote workers, a web node
  on another host: an address is used only where ``host()`` is the same, so a path on another machine's
  disk is never tried), a socket that cannot be reached (the worker gone: the address is forgotten until
  the next look-up), a full queue or backlog.
- **An engine that dies mid-run** (killed past its deadline, out of memory) is answered for by its worker
  under the request's id (``Engine.watch``): on the lane, and to the waiting thread's datagram socket. On a
  connection, the engine's end closes it, and the web process waits for the lane's answer (``Lane.wait_reply``)
  up to ``ORPHAN_S``. When none comes (the whole worker is gone; a datagram's sender notices it within
  ``CHECK_S`` by its listening socket), the run is sent over the lane, to whichever worker is left.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from functools import cache

from django.conf import settings

from hub.errors import HubError
from hub.gateway import wire
from hub.gateway.lane import Lane, Stale, new_id

REFRESH_S = 1.0  # how often a web process looks up the local engines announced
ORPHAN_S = 2.0  # how long a web process waits for a worker to answer for an engine that died mid-run
BACKLOG = 128
log = logging.getLogger(__name__)


@cache
def host() -> str:
    """This host as a socket path sees it: the host name, the kernel's boot id and the mount namespace. Two
    processes with the same value see the same files (a container, or a service with a private /tmp, has
    a namespace of its own; another machine another boot id). Empty where it cannot be told (no /proc):
    then nothing is announced or tried."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        namespace = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""
    return f"{socket.gethostname()}/{boot_id}/{namespace}"


# --- the worker's side ---------------------------------------------------------------------------------


PREFIX = "hub-lane-"


class Listener:
    """A worker's two sockets for one device lane, in a private folder: a datagram socket (``<queue>.d``) for
    requests that fit one datagram, and a listening socket (``<queue>``) for larger ones; its lane engines
    inherit both."""

    def __init__(self, queue: str) -> None:
        sweep(tempfile.gettempdir())
        self.folder = tempfile.mkdtemp(prefix=PREFIX)  # mode 0700: only this user may connect or send
        self.path = os.path.join(self.folder, queue)
        self.datagram_path = self.path + ".d"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.sock.bind(self.path)
            self.sock.listen(BACKLOG)
            self.datagram.bind(self.datagram_path)
            _room_for_datagrams(self.datagram)
        except OSError:
            self.close()
            raise

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    @property
    def datagram_fd(self) -> int:
        return self.datagram.fileno()

    @property
    def address(self) -> str:
        """What the worker announces: this host and the sockets' paths."""
        return json.dumps({"host": host(), "path": self.path, "datagram": self.datagram_path}, sort_keys=True)

    def close(self) -> None:
        self.sock.close()
        self.datagram.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _room_for_datagrams(sock: socket.socket) -> None:
    """A send buffer for datagrams of ``wire.DATAGRAM_BYTES`` (the kernel caps it at ``net.core.wmem_max``;
    a frame it will not take whole goes another way: ``wire.send_datagram``)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * wire.DATAGRAM_BYTES)
    except OSError:
        pass


def sweep(folder: str, empty_after_s: float = 60.0) -> int:
    """Remove the folders that workers killed without a clean-up left in ``folder``: this user's ``hub-lane-*``
    folders where nobody listens on any socket (a connection is refused), or, with no socket in them, older
    than ``empty_after_s`` (a worker makes its folder and binds in the same moment). Returns how many went."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False) \
                    or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            sockets = [os.path.join(entry.path, name) for name in os.listdir(entry.path) if not name.endswith(".d")]
            stale = all(_nobody_listens(path) for path in sockets) if sockets else \
                time.time() - entry.stat(follow_symlinks=False).st_mtime > empty_after_s
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed


def _nobody_listens(path: str) -> bool:
    found = _connect(path)
    if isinstance(found, socket.socket):
        found.close()  # a live engine reads an empty request and goes back to waiting
    return found is None


# --- the web process's side ----------------------------------------------------------------------------


Door = tuple[str, str]  # a worker's (listening socket, datagram socket or "") on this host


class Nearby:
    """This process's list of the local engines' sockets announced for each queue, looked up again at
    most every ``REFRESH_S``; a socket that could not be connected is left out until then."""

    def __init__(self) -> None:
        self.known: dict[tuple[int, str], tuple[float, list[Door]]] = {}  # (the lane's id, queue) -> doors
        self.turn = 0
        self.lock = threading.Lock()

    def paths(self, lane: Lane, queue: str) -> list[Door]:
        now, key = time.monotonic(), (id(lane), queue)
        found = self.known.get(key)
        if found is None or found[0] < now:
            found = self.known[key] = (now + REFRESH_S, self._look_up(lane, queue))
        paths = found[1]
        if len(paths) > 1:  # several workers on this host: take turns
            self.turn += 1
            start = self.turn % len(paths)
            paths = paths[start:] + paths[:start]
        return paths

    @staticmethod
    def _look_up(lane: Lane, queue: str) -> list[Door]:
        mine = host()
        if not mine:
            return []
        try:
            announced = lane.nearby(queue)
        except HubError:
            return []  # the lane unreachable: the lane's own call says so
        paths = []
        for raw in announced:
            try:
                address = json.loads(raw)
            except ValueError:
                continue
            if isinstance(address, dict) and address.get("host") == mine and isinstance(address.get("path"), str):
                datagram = address.get("datagram")  # absent from the announcements of older workers
                paths.append((address["path"], datagram if isinstance(datagram, str) else ""))
        return sorted(paths)

    def forget(self, lane: Lane, queue: str, path: str) -> None:
        key = (id(lane), queue)
        with self.lock:
            found = self.known.get(key)
            if found is not None:
                self.known[key] = (found[0], [door for door in found[1] if door[0] != path])

    def clear(self) -> None:
        self.known.clear()


nearby = Nearby()


def _connect(path: str) -> socket.socket | None | bool:
    """A connection to the socket at ``path``; None when nobody listens there (gone, or not a socket), False
    when its backlog is full (busy: the lane takes this one)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)  # a full backlog answers EAGAIN at once instead of making us wait
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        return False if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK) else None
    sock.setblocking(True)
    return sock


def call(lane: Lane, queue: str, message: bytes, timeout: float, generation: bytes | None = None
         ) -> bytes | memoryview | None:
    """``lane.call``, through a local engine when one is announced on this host (the same answers: the
    worker's reply, None after ``timeout``; ``Stale``, ``NoWorker``): as a datagram when it fits one, else
    on a connection of its own."""
    if settings.HUB_GATEWAY_LOCAL:
        for path, datagram in nearby.paths(lane, queue):
            if datagram and len(message) + FRAME_ROOM <= wire.DATAGRAM_BYTES:
                found = _call_by_datagram(path, datagram, lane, queue, message, timeout, generation)
                if found is BUSY:
                    break
                if found is GONE:
                    nearby.forget(lane, queue, path)
                    continue
                if found is not TOO_LARGE:
                    return found
            connection = _connect(path)
            if connection is False:
                break
            if connection is None:
                nearby.forget(lane, queue, path)
                continue
            with connection:
                return _call_on(connection, lane, queue, message, timeout, generation)
    return lane.call(queue, message, timeout, generation)


# --- a request as one datagram -------------------------------------------------------------------------

FRAME_ROOM = 256  # a frame's length fields and control header, past its message
CHECK_S = 1.0  # while an answer is awaited, how often the worker is checked for (its listening socket)
BUSY, GONE, TOO_LARGE = object(), object(), object()  # why a datagram was not sent
ON_THE_LANE, LOST = object(), object()  # the answer was too large for a datagram; the worker went away


class _Door(threading.local):
    """This thread's datagram socket (bound to an abstract address the kernel picks, gone with the socket),
    the buffer its answers are read into, and the receive timeout last set on it."""

    sock: socket.socket | None = None
    buffer: bytearray = bytearray(0)
    timeout = -1.0

    def open(self) -> socket.socket:
        if self.sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind("")  # autobind
            _room_for_datagrams(sock)
            self.sock, self.buffer, self.timeout = sock, bytearray(wire.DATAGRAM_BYTES), -1.0
        return self.sock

    def wait_at_most(self, seconds: float) -> None:
        if seconds != self.timeout:
            wire.wait_at_most(self.sock, seconds)
            self.timeout = seconds


_door = _Door()


def _call_by_datagram(path: str, datagram: str, lane: Lane, queue: str, message: bytes, timeout: float,
                      generation: bytes | None) -> bytes | memoryview | None | object:
    """``call`` as one datagram to the lane's engines (whichever is idle reads it) and one datagram back:
    no connection to make. Returns the answer (None after ``timeout``), or ``BUSY`` (their queue is full),
    ``GONE`` (nobody there) or ``TOO_LARGE`` (the kernel would not take it whole), having sent nothing.

    Only a datagram from the lane's own socket, in a folder only its user may enter, is taken for an
    answer, and only the one with this request's id (an earlier request's late answer is skipped). An engine
    that dies mid-run is answered for by its worker, on this socket too (``Engine.watch``); a worker gone
    altogether is noticed within ``CHECK_S`` and the run is sent over the lane."""
    sock = _door.open()
    request_id = new_id()
    started = time.monotonic()
    current = _checked(lane, generation) if generation else None
    try:
        found = None if wire.send_datagram(sock, datagram, {"id": request_id}, message, wire.DATAGRAM_BYTES) \
            else TOO_LARGE
    except BlockingIOError:
        found = BUSY
    except OSError:  # refused, or no such socket: the worker is gone
        found = GONE
    if found is None:
        found = _await_datagram(sock, request_id, path, datagram, started + timeout)
    if current is not None and (now := current()) != generation:
        raise Stale(now)
    left = max(started + timeout - time.monotonic(), 0.01)
    if found is ON_THE_LANE:
        return lane.wait_reply(request_id, left)
    if found is LOST:
        log.warning("gateway: the worker of the local engines on %s went away during request %s; sending it "
                    "over the lane", queue, request_id)
        return lane.call(queue, message, left, generation)
    return found



def _await_datagram(sock: socket.socket, request_id: str, path: str, datagram: str, deadline: float
                    ) -> bytes | None | object:
    """The answer to ``request_id`` (a copy: the buffer is this thread's), ``ON_THE_LANE``, None past
    ``deadline``, or ``LOST`` when nobody listens on the worker's socket any more."""
    while (left := deadline - time.monotonic()) > 0:
        _door.wait_at_most(min(left, CHECK_S))
        try:
            size, sender = sock.recvfrom_into(_door.buffer)
        except BlockingIOError:  # SO_RCVTIMEO passed
            if _nobody_listens(path):
                return LOST
            continue
        if sender != datagram:
            continue  # not from the lane's engines
        try:
            control, answer = wire.parse_frame(memoryview(_door.buffer)[:size])
        except wire.WireError:
            continue
        if control.get("id") != request_id:
            continue  # the late answer to a request this thread gave up on
        return ON_THE_LANE if control.get("lane") else bytes(answer)
    return None


def _checked(lane: Lane, generation: bytes) -> Callable[[], bytes] | None:
    """Check ``generation`` against the one this process heard announced (no round trip): ``Stale`` before
    anything is sent. Where it heard none, or an older one than the caller's, the lane is asked instead,
    alongside the run: the function that reads its answer."""
    heard = lane.generation_heard()
    try:
        behind = heard is None or int(heard) < int(generation)
    except ValueError:  # not a counter: ask
        behind = True
    if behind:
        return lane.generation_soon()
    if heard != generation:
        raise Stale(heard)
    return None


def _call_on(connection: socket.socket, lane: Lane, queue: str, message: bytes, timeout: float,
             generation: bytes | None) -> bytes | memoryview | None:
    request_id = new_id()
    started = time.monotonic()
    current = _checked(lane, generation) if generation else None
    found, timed_out = None, False
    try:
        wire.wait_at_most(connection, timeout)
        wire.send_frame(connection, {"id": request_id}, message)
        found = wire.recv_frame(connection)
    except BlockingIOError:  # SO_RCVTIMEO passed
        timed_out = True
    except OSError:
        found = None
    if current is not None and (now := current()) != generation:
        raise Stale(now)
    if found is not None:
        return found[1]
    if timed_out:
        return None
    left = timeout - (time.monotonic() - started)
    answer = lane.wait_reply(request_id, min(ORPHAN_S, max(left, 0.0)))
    if answer is not None:
        return answer  # the worker's answer for its engine (overtime, memory_limit, run_failed)
    log.warning("gateway: the local engine on %s closed request %s without an answer; sending it over the lane",
                queue, request_id)
    return lane.call(queue, message, max(timeout - (time.monotonic() - started), 0.01), generation)
