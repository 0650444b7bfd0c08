"""The gateway's one channel to the engines, on ZeroMQ: a synchronous call, a streamed generation's pieces and
its cancellation all travel here; who serves what lives apart (``hub.gateway.presence``).

- **A worker** opens a ``Door`` per queue it serves (``cpu``, ``gpu``, ``generate-cpu``...): a ROUTER bound
  to an ``ipc://`` endpoint in a private folder (mode 0700) and, given ``HUB_GATEWAY_TCP``, a second ROUTER on
  ``tcp://`` with CURVE (authenticated and encrypted: only clients whose public key lies in the keys folder's
  ``clients/`` are let in, ``keys``). Behind them its handler threads (each with its own engine child, which
  serves only this parent) say when they are idle; the door's broker hands each call to an idle one (the
  zguide's load-balancing broker), keeps at most ``PENDING`` calls waiting, and past that stops reading, so
  that the high-water marks (``HUB_GATEWAY_HWM``) push back on the callers.
- **A web process** keeps a DEALER per thread and queue, connected to every door announced for the queue (the
  ``ipc://`` ones of its own host, else the ``tcp://`` ones) and sends a call as multipart frames from the
  arrays' own memory (no copy). ``ZMQ_IMMEDIATE`` queues a call only on a connection that is up, so a door
  that went away takes none. A call carries the generation of its caller's remembered answers, checked first
  against the one this process heard (``Stale``, nothing sent).

Frames, caller to door: ``kind`` (``call`` or ``cancel``), the request's id, a JSON control (``deadline``),
then the message; door to caller: the request's id, then the answer (one frame per streamed piece).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Protocol

import orjson
import zmq
from django.conf import settings

from hub.gateway.presence import NoWorker, Stale, get_presence

log = logging.getLogger(__name__)
REFRESH_S = 1.0  # how often a web process looks up the doors announced
MAX_SOCKETS = 8192  # of this process's context
PENDING = 16  # calls a door holds while every handler is busy; past that the high-water marks push back
IDLE_S = 0.25  # how often an idle handler is asked to look after its engine
HEARTBEAT_MS = 2000  # a caller's ping to each door; three missed: the connection is dropped (``LOST``)
CALL, CANCEL, READY = b"call", b"cancel", b"ready"
LOST = b"lost"  # what ``_receive`` answers when a door's connection dropped


# --- keys ----------------------------------------------------------------------------------------------


def keys_dir() -> Path:
    return Path(settings.HUB_GATEWAY_KEYS_DIR)


@cache
def _keys(folder: str) -> tuple[bytes, bytes, bytes, bytes]:
    """(server public, server secret, client public, client secret), made on first use: copy the folder to
    every node of the hub (a web node on another host needs its ``server.key`` and ``clients/``)."""
    import zmq.auth

    root = Path(folder)
    if not (root / "server.key_secret").is_file():
        root.parent.mkdir(parents=True, exist_ok=True)
        made = Path(tempfile.mkdtemp(prefix=".keys-", dir=root.parent))
        zmq.auth.create_certificates(made, "server")
        (made / "clients").mkdir()
        zmq.auth.create_certificates(made / "clients", "client")
        try:
            os.rename(made, root)
        except OSError:  # another process made them first
            shutil.rmtree(made, ignore_errors=True)
    server = zmq.auth.load_certificate(root / "server.key_secret")
    client = zmq.auth.load_certificate(root / "clients" / "client.key_secret")
    return (*server, *client)  # type: ignore[return-value]


def keys() -> tuple[bytes, bytes, bytes, bytes]:
    return _keys(str(keys_dir()))


_context: dict[int, zmq.Context] = {}
_authenticators: dict[int, object] = {}


def context() -> zmq.Context:
    """This process's ZeroMQ context (a new one after a fork)."""
    pid = os.getpid()
    if pid not in _context:
        _context.clear()
        _context[pid] = zmq.Context()
        # libzmq's 1,023 counts sockets still being closed (asynchronously) too: a thread's DEALER and two monitor
        # sockets per queue, and links dropped faster than the reaper closes them on a loaded host
        _context[pid].set(zmq.MAX_SOCKETS, MAX_SOCKETS)
    return _context[pid]


@cache
def host() -> str:
    """This host as an ``ipc://`` path sees it: the host name, the kernel's boot id and the mount namespace;
    empty where it cannot be told (then only ``tcp://`` is used)."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""
    return f"{socket.gethostname()}/{boot_id}/{namespace}"


# --- the worker's side -----------------------------------------------------------------------------------


class Call:
    """One call a handler serves: its control (``deadline``; ``seconds``, the run's length), its message
    frames, ``reply`` for each answer frame (a streamed answer replies once per piece) and ``cancelled`` (the
    caller went away)."""

    def __init__(self, door: Door, sock: zmq.Socket, route: list, control: dict, body: list) -> None:
        self.door, self.sock, self.route, self.control, self.body = door, sock, route, control, body

    @property
    def request_id(self) -> bytes:
        return self.route[-1].bytes

    @property
    def deadline(self) -> float:
        return float(self.control.get("deadline") or 0)

    def reply(self, answer) -> None:
        self.sock.send_multipart([*self.route, answer], copy=False)

    @property
    def cancelled(self) -> bool:
        return self.request_id in self.door.cancelled


class Handler(Protocol):
    def __call__(self, call: Call) -> None: ...
    def idle(self) -> None: ...
    def close(self) -> None: ...


class Door:
    """A worker's door for one queue: its endpoints, a broker thread and one thread per handler."""

    def __init__(self, queue: str, handlers: list[Handler], worker: str) -> None:
        self.queue, self.handlers, self.worker = queue, handlers, worker
        self.stop_event = threading.Event()
        self.started = threading.Semaphore(0)  # one release per handler once its engine is up (``wait_ready``)
        self.cancelled: set[bytes] = set()
        self.running: set[bytes] = set()
        self.backend_address = f"inproc://door-{queue}-{id(self)}"
        ctx = context()
        self.folder = tempfile.mkdtemp(prefix=f"hub-gw-{os.getpid()}-")  # mode 0700: only this user connects
        self.ipc = f"ipc://{self.folder}/{queue}"
        self.frontends = [self._router(ctx)]
        self.frontends[0].bind(self.ipc)
        self.tcp = ""
        if settings.HUB_GATEWAY_TCP:
            self.frontends.append(self._tcp(ctx))
        self.backend = ctx.socket(zmq.ROUTER)
        self.backend.bind(self.backend_address)
        self.threads = [threading.Thread(target=self._broker, name=f"door-{queue}", daemon=True)]
        self.threads += [threading.Thread(target=self._serve, args=(handler,), name=f"door-{queue}-{index}",
                                          daemon=True) for index, handler in enumerate(handlers)]
        for thread in self.threads:
            thread.start()

    @staticmethod
    def _router(ctx: zmq.Context) -> zmq.Socket:
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, settings.HUB_GATEWAY_HWM)
        # A ROUTER drops what it cannot queue for a peer, and a streamed answer's pieces must all arrive however
        # slowly its caller reads: answers queue without a mark (a call's answer is bounded by the call itself, a
        # generation by its tokens); the calls a door takes are what HUB_GATEWAY_HWM bounds.
        sock.setsockopt(zmq.SNDHWM, 0)
        return sock

    def _tcp(self, ctx: zmq.Context) -> zmq.Socket:
        """The door across hosts: CURVE, and a ZAP handler that lets in only the keys in ``clients/``."""
        from zmq.auth.thread import ThreadAuthenticator

        server_public, server_secret, _, _ = keys()
        if os.getpid() not in _authenticators:  # one ZAP handler per process
            auth = _authenticators[os.getpid()] = ThreadAuthenticator(ctx)
            auth.start()
            auth.configure_curve(domain="*", location=str(keys_dir() / "clients"))
        sock = self._router(ctx)
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = server_secret, server_public, True
        bind, _, port = settings.HUB_GATEWAY_TCP.rpartition(":")
        bind = bind or "127.0.0.1"
        if port in ("", "0"):
            port = str(sock.bind_to_random_port(f"tcp://{bind}"))
        else:
            sock.bind(f"tcp://{bind}:{port}")
        wildcard = bind in ("*", "0.0.0.0", "::")  # noqa: S104 - recognised, not bound here
        self.tcp = f"tcp://{settings.HUB_GATEWAY_ADVERTISE or (socket.getfqdn() if wildcard else bind)}:{port}"
        return sock

    @property
    def address(self) -> dict:
        """What the worker announces for this queue (``hub.gateway.presence``)."""
        found = {"worker": self.worker, "host": host(), "ipc": self.ipc}
        return {**found, "tcp": self.tcp, "key": keys()[0].decode()} if self.tcp else found

    def _broker(self) -> None:
        """Hand each call to an idle handler; answers go back to the socket their call came from."""
        idle: deque[bytes] = deque()
        pending: deque[tuple[int, list]] = deque()
        poller, reading = zmq.Poller(), True
        for sock in (self.backend, *self.frontends):
            poller.register(sock, zmq.POLLIN)
        while not self.stop_event.is_set():
            if reading != (len(pending) < PENDING):  # a full wait list: the callers' high-water marks push back
                reading = not reading
                for front in self.frontends:
                    poller.modify(front, zmq.POLLIN if reading else 0)
            events = dict(poller.poll(int(IDLE_S * 1000)))
            if self.backend in events:
                frames = self.backend.recv_multipart(copy=False)
                if len(frames) == 2:
                    idle.append(frames[0].bytes)
                else:  # [handler, door index, caller, request id, answer]
                    self.frontends[frames[1].bytes[0]].send_multipart(frames[2:], copy=False)
            for index, front in enumerate(self.frontends):
                if events.get(front):
                    frames = front.recv_multipart(copy=False)  # [caller, kind, request id, control, *message]
                    if len(frames) < 3:
                        continue
                    if frames[1].bytes == CANCEL:
                        self._cancel(frames[2].bytes, pending)
                    elif len(frames) >= 4:
                        pending.append((index, frames))
            while idle and pending:
                index, frames = pending.popleft()
                self.running.add(frames[2].bytes)
                self.backend.send_multipart([idle.popleft(), bytes([index]), frames[0], frames[2], *frames[3:]],
                                            copy=False)
        for sock in (*self.frontends, self.backend):
            sock.close(linger=0)

    def _cancel(self, request_id: bytes, pending: deque) -> None:
        if request_id in self.running:
            self.cancelled.add(request_id)
        for item in list(pending):
            if item[1][2].bytes == request_id:
                pending.remove(item)

    def _serve(self, handler: Handler) -> None:
        sock = context().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.backend_address)
        self._quietly(handler.idle)  # its engine up before it takes a call
        self.started.release()
        sock.send(READY)
        try:
            while not self.stop_event.is_set():
                if not sock.poll(int(IDLE_S * 1000)):
                    self._quietly(handler.idle)
                    continue
                index, caller, request_id, control, *body = sock.recv_multipart(copy=False)
                try:
                    call = Call(self, sock, [index, caller, request_id], orjson.loads(control.bytes), body)
                    handler(call)
                except Exception:  # noqa: BLE001 - logged with its traceback; the caller gets a code only
                    log.exception("gateway: a call on %s failed", self.queue)
                finally:
                    self.running.discard(request_id.bytes)
                    self.cancelled.discard(request_id.bytes)
                    sock.send(READY)
        finally:
            sock.close(linger=0)
            self._quietly(handler.close)

    def _quietly(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:  # noqa: BLE001 - an engine that cannot start: logged, tried again at the next look
            log.warning("gateway: a handler of %s failed", self.queue, exc_info=True)
            self.stop_event.wait(5.0)

    def wait_ready(self, timeout: float) -> None:
        """Until every handler has started its engine (or ``timeout`` seconds), so that a worker announces
        doors whose engines are up."""
        deadline = time.monotonic() + timeout
        for _ in self.handlers:
            self.started.acquire(timeout=max(deadline - time.monotonic(), 0))

    def close(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)


def sweep(folder: str | None = None) -> int:
    """Remove the ``hub-gw-<pid>-*`` folders of this user's workers that died without a clean-up."""
    removed = 0
    for entry in Path(folder or tempfile.gettempdir()).glob("hub-gw-*-*"):
        try:
            pid = int(entry.name.split("-")[2])
            if entry.stat().st_uid != os.getuid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
        except (ValueError, IndexError, OSError):
            continue
    return removed


# --- the web process's side -------------------------------------------------------------------------------


class _Doors:
    """This process's look-up of the doors announced per queue, at most every ``REFRESH_S``: the endpoints
    to use (its own host's ``ipc://`` ones when there are any, else ``tcp://`` ones) and whether over TCP."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[float, list[str], bool]] = {}

    def of(self, queue: str) -> tuple[list[str], bool]:
        now = time.monotonic()
        found = self.known.get(queue)
        if found is None or found[0] < now:
            found = self.known[queue] = (now + REFRESH_S, *self._look_up(queue))
        return found[1], found[2]

    @staticmethod
    def _look_up(queue: str) -> tuple[list[str], bool]:
        announced = get_presence().addresses(queue)
        mine = host()
        near = sorted(a["ipc"] for a in announced if settings.HUB_GATEWAY_IPC and mine and a.get("host") == mine
                      and isinstance(a.get("ipc"), str))
        if near:
            return near, False
        return sorted(a["tcp"] for a in announced if isinstance(a.get("tcp"), str) and a["tcp"]), True

    def clear(self) -> None:
        self.known.clear()


doors = _Doors()


Link = tuple[zmq.Socket, zmq.Socket, set[str]]  # a DEALER, its monitor, the endpoints it is connected to


class _Sockets(threading.local):
    """This thread's DEALER per (queue, over TCP), connected to the doors' endpoints, with a monitor that hears
    a door's connection drop (its worker died: ``LOST``)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.by_queue: dict[tuple[str, bool], Link] = {}

    def get(self, queue: str, endpoints: list[str], tcp: bool) -> Link:
        if self.pid != os.getpid():  # inherited across a fork: not ours to use
            self.pid, self.by_queue = os.getpid(), {}
        found = self.by_queue.get((queue, tcp))
        if found is None:
            sock = context().socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.IMMEDIATE, 1)  # a call waits for a connection that is up, never a dead door
            sock.setsockopt(zmq.SNDHWM, settings.HUB_GATEWAY_HWM)
            sock.setsockopt(zmq.RCVHWM, settings.HUB_GATEWAY_HWM)
            sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)  # a host gone silent is a dropped connection too
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * HEARTBEAT_MS)
            if tcp:
                server_public, _, client_public, client_secret = keys()
                sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = (server_public, client_public,
                                                                                   client_secret)
            # a name of its own: pyzmq's default names it by the socket's descriptor, which a socket just closed
            # (closing is asynchronous) may still hold bound ("Address already in use")
            monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED, f"inproc://monitor-{os.getpid()}-{next(_ids)}")
            found = self.by_queue[(queue, tcp)] = (sock, monitor, set())
        sock, monitor, connected = found
        for endpoint in connected - set(endpoints):
            sock.disconnect(endpoint)
            connected.discard(endpoint)
        for endpoint in set(endpoints) - connected:
            sock.connect(endpoint)
            connected.add(endpoint)
        return found

    def drop(self, link: Link) -> None:
        """Close ``link`` (a door's connection on it dropped); the next call opens a new one. Its pipe to the dead
        door could otherwise still take the call sent again."""
        for key, found in list(self.by_queue.items()):
            if found is link:
                del self.by_queue[key]
        link[1].close(linger=0)
        link[0].close(linger=0)

    def clear(self) -> None:
        """Close every link of this thread (the next call opens new ones, with the keys of then)."""
        for link in list(self.by_queue.values()):
            self.drop(link)


_sockets = _Sockets()
_ids = itertools.count()


def _checked(generation: bytes | None) -> None:
    """``Stale`` when ``generation`` is not the current one (as this process heard it, else as asked)."""
    if not generation:
        return
    presence = get_presence()
    current = presence.generation_heard()
    try:
        behind = current is None or int(current) < int(generation)
    except ValueError:
        behind = True
    if behind:
        current = presence.generation()
    if current != generation:
        raise Stale(current)


def _send(queue: str, request_id: bytes, frames: list, deadline: float, grace: float
          ) -> Link | None:
    """Send a call, to run until ``grace`` seconds before ``deadline``; its socket and monitor, or None when no
    door took it before ``deadline``. While none takes it, the doors announced are looked up again: when none
    is left (its worker died and is no longer announced), ``NoWorker``."""
    while True:
        endpoints, tcp = doors.of(queue)
        if not endpoints:
            raise NoWorker(queue)
        link = sock, monitor, _ = _sockets.get(queue, endpoints, tcp)
        while monitor.poll(0):  # drops heard before this call are not its own
            monitor.recv_multipart()
        run_s = deadline - time.monotonic() - grace
        control = orjson.dumps({"deadline": time.time() + run_s, "seconds": run_s})
        try:
            sock.send_multipart([CALL, request_id, control, *frames], flags=zmq.NOBLOCK, copy=False)
            return link
        except zmq.Again:  # no connection up yet, or every door's queue full
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sock.poll(int(min(left, REFRESH_S) * 1000) + 1, zmq.POLLOUT)


def _receive(link: Link, request_id: bytes, deadline: float) -> zmq.Frame | bytes | None:
    """The next answer frame to ``request_id`` (a late one to an earlier call is skipped), ``LOST`` when a door's
    connection dropped meanwhile (the call may have been the dead worker's: ``link`` is closed, ``_Sockets.drop``),
    None past ``deadline``."""
    sock, monitor, _ = link
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    while (left := deadline - time.monotonic()) > 0:
        events = dict(poller.poll(int(left * 1000) + 1))
        if sock in events:
            frames = sock.recv_multipart(copy=False)
            if len(frames) == 2 and frames[0].bytes == request_id:
                return frames[1]
        elif monitor in events:
            _sockets.drop(link)
            return LOST
    return None


def call(queue: str, frames: list, timeout: float, generation: bytes | None = None, grace: float = 0.0
         ) -> memoryview | None:
    """Send one call (``frames``: its message, in pieces) to whichever engine of ``queue`` is idle, to run
    for up to ``timeout - grace`` seconds; its answer (a view of the received frame), or None after
    ``timeout`` seconds. Raises ``NoWorker``, ``Stale``."""
    deadline = time.monotonic() + timeout
    if not doors.of(queue)[0]:
        raise NoWorker(queue)
    _checked(generation)
    request_id = os.urandom(16)
    while (sent := _send(queue, request_id, frames, deadline, grace)) is not None:
        answer = _receive(sent, request_id, deadline)
        if answer is not LOST:  # a drop: sent again, to a door that is up (a run has no side effects)
            return answer.buffer if answer is not None else None
    return None


def stream(queue: str, message: bytes, timeout: float, last: Callable[[bytes], bool], grace: float = 0.0
           ) -> Iterator[bytes]:
    """Send ``message`` to ``queue`` (to run for up to ``timeout - grace`` seconds) and yield its answer's
    pieces in order up to the one ``last`` knows as the end, each within ``timeout`` seconds
    (``TimeoutError`` when one does not come). A reader that stops early (its client went away) tells the
    engine to stop (``cancel``)."""
    request_id = os.urandom(16)
    sent = _send(queue, request_id, [message], time.monotonic() + timeout, grace)
    if sent is None:
        raise TimeoutError(f"no engine of {queue} took the request in {timeout:.0f} s")
    finished, pieces = False, 0
    try:
        while not finished:
            piece = _receive(sent, request_id, time.monotonic() + timeout)
            if piece is LOST and not pieces:  # nothing came yet: sent again, to a door that is up
                sent = _send(queue, request_id, [message], time.monotonic() + timeout, grace)
                if sent is None:
                    raise TimeoutError(f"no engine of {queue} took the request in {timeout:.0f} s")
                continue
            if piece is LOST:
                raise TimeoutError(f"the engine of {queue} went away mid-answer")
            if piece is None:
                raise TimeoutError(f"no answer from {queue} in {timeout:.0f} s")
            finished, pieces = last(piece.bytes), pieces + 1
            yield piece.bytes
    finally:
        if not finished and sent is not None:
            try:
                sent[0].send_multipart([CANCEL, request_id, b"{}"], flags=zmq.NOBLOCK)
            except zmq.ZMQError:
                pass  # the door went away: nothing runs there any more
