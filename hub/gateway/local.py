"""The lanes' shortcut on one host: a web process hands a synchronous run straight to a lane engine of a
worker on the same host, over a Unix socket that the worker announces, so the run's inputs and answer
never pass through Redis (or the file lane's folders). Issue 39: a run crossed three processes (web, Redis,
engine) where the floor's stays in one, and the lane was 0.55-0.95 ms of a 1.1-1.9 ms request.

- **The worker** (``workers.gateway``) makes one listening socket per device lane (``Listener``) in a
  private folder (mode 0700, under ``TMPDIR``) and announces its address with the host's identity
  (``host()``) beside its presence on the lane (``Lane.announce(..., local=...)``). Its lane engines share the
  socket: whichever is idle accepts the next connection (``hub.gateway.engine.serve_local``), so the
  socket's backlog is the queue, as the Redis list is for the others.
- **A web process** (``call``) looks up the addresses announced for the device (at most every
  ``REFRESH_S``), keeps those of its own host, connects, sends the request and reads the answer on that
  one connection. The registry's generation is checked first against the one this process heard
  announced (``RedisLane.generation_heard``: a subscription to the bumps, read without a round trip), so
  that a stale request is refused (``Stale``) before anything is sent, as the lane refuses it; when the
  process is not sure it hears (just started, the subscription lost) it asks the lane alongside the run
  (its ``GET`` goes out before the request and is read after the answer), and a stale answer is discarded.
- **Everything else goes over the lane as before**: no local engine announced (remote workers, a web node
  on another host: an address is used only where ``host()`` is the same, so a path on another machine's
  disk is never tried), a socket that cannot be connected (the worker gone: the address is forgotten until
  the next look-up), a full backlog.
- **An engine that dies mid-run** (killed past its deadline, out of memory) closes the connection; its
  worker answers for it on the lane under the request's id, as for a lane request (``Engine.watch``), and
  the web process waits for that answer (``Lane.wait_reply``) up to ``ORPHAN_S``. When none comes (the
  whole worker is gone), the run is sent over the lane, to whichever worker is left.
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
    """A worker's listening socket for one device lane, in a private folder; its lane engines inherit it."""

    def __init__(self, queue: str) -> None:
        sweep(tempfile.gettempdir())
        self.folder = tempfile.mkdtemp(prefix=PREFIX)  # mode 0700: only this user may connect
        self.path = os.path.join(self.folder, queue)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(self.path)
            self.sock.listen(BACKLOG)
        except OSError:
            self.close()
            raise

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    @property
    def address(self) -> str:
        """What the worker announces: this host and the socket's path."""
        return json.dumps({"host": host(), "path": self.path}, sort_keys=True)

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


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
            sockets = [os.path.join(entry.path, name) for name in os.listdir(entry.path)]
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


class Nearby:
    """This process's list of the local engines' sockets announced for each queue, looked up again at
    most every ``REFRESH_S``; a socket that could not be connected is left out until then."""

    def __init__(self) -> None:
        self.known: dict[tuple[int, str], tuple[float, list[str]]] = {}  # (the lane's id, queue) -> paths
        self.turn = 0
        self.lock = threading.Lock()

    def paths(self, lane: Lane, queue: str) -> list[str]:
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
    def _look_up(lane: Lane, queue: str) -> list[str]:
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
                paths.append(address["path"])
        return sorted(paths)

    def forget(self, lane: Lane, queue: str, path: str) -> None:
        key = (id(lane), queue)
        with self.lock:
            found = self.known.get(key)
            if found is not None and path in found[1]:
                self.known[key] = (found[0], [p for p in found[1] if p != path])

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
    worker's reply, None after ``timeout``; ``Stale``, ``NoWorker``)."""
    if settings.HUB_GATEWAY_LOCAL:
        for path in nearby.paths(lane, queue):
            connection = _connect(path)
            if connection is False:
                break
            if connection is None:
                nearby.forget(lane, queue, path)
                continue
            with connection:
                return _call_on(connection, lane, queue, message, timeout, generation)
    return lane.call(queue, message, timeout, generation)


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
